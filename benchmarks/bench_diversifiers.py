"""Per-question cost of the selection kernels: RNG-Score at D = 1024, MMR and DPP at D = 384.

Every figure is microseconds per question (m = 100 candidates, k = 5) with one BLAS thread: the best
of repeated passes through the same random clustered questions, as thread CPU time and wall clock. Each vectorised
kernel runs beside its plain-loop reference (tests/helpers/reference.py) and, for MMR and DPP,
beside the ``pyversity`` package's implementations, in the same process and on the same inputs.

Columns: "kernel" takes arrays (embeddings, relevance) like pyversity does; "pool" is the
diversifier's ``select_indices(pool)``, which adds reading the query similarities off the Pool.
RNG runs twice: "rng" is ``rng_select`` (scores only a relevance-ranked prefix of the pool) and
"rng/full" is ``rng_select_full`` (the whole (m, m) Gram matrix); their selections must agree.

    python benchmarks/bench_diversifiers.py [--questions 200] [--repeats 7] [--seed 0]
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_limits

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the loop references live with the tests

from harness.core.types import Candidate, Example, Pool
from harness.diversify.dpp import DPPDiversifier, dpp_greedy_map
from harness.diversify.mmr import MMRDiversifier, mmr_select
from harness.diversify.relevance import query_similarity
from harness.diversify.rng import RNGDiversifier, rng_select, rng_select_full
from tests.helpers.reference import dpp_brute_force, mmr_loop, rng_loop

M, K = 100, 5
TARGETS_US = {"rng": 230.0, "rng/full": 230.0, "mmr": 200.0, "dpp": 200.0}


def make_questions(n: int, d: int, seed: int) -> list[Pool]:
    """Random questions whose candidates come from a handful of topics (so redundancy is real), ranked."""
    rng = np.random.default_rng(seed)
    pools = []
    for q in range(n):
        centres = rng.normal(size=(6, d))
        rows = centres[rng.integers(6, size=M)] + 0.6 * rng.normal(size=(M, d))
        rows /= np.linalg.norm(rows, axis=1, keepdims=True)
        query = centres[0] + 0.8 * rng.normal(size=d)
        query /= np.linalg.norm(query)
        embeddings, query = rows.astype(np.float32), query.astype(np.float32)
        scores = embeddings @ query
        order = np.argsort(-scores, kind="stable")
        example = Example(f"q{q}", "question", ("answer",), (), (), hops=2)
        candidates = [Candidate(f"c{i}", "", (f"d{i}",), score=float(scores[i])) for i in order]
        pools.append(Pool(example, candidates, np.ascontiguousarray(embeddings[order]), query))
    return pools


def per_question_us(run: Callable[[Pool], object], pools: list[Pool], repeats: int) -> tuple[float, float]:
    """(CPU, wall): the best over ``repeats`` passes of the mean time per question, after a warm-up pass.

    CPU is the benchmarking thread's own CPU time (with one BLAS thread all the work runs on it), so
    time spent descheduled by other processes on a shared machine is not counted; wall is printed
    beside it. Best rather than median because interference only ever adds time.
    """
    for pool in pools:
        run(pool)
    cpu, wall = [], []
    for _ in range(repeats):
        cpu_start, wall_start = time.thread_time_ns(), time.perf_counter_ns()
        for pool in pools:
            run(pool)
        wall.append((time.perf_counter_ns() - wall_start) / len(pools) / 1e3)
        cpu.append((time.thread_time_ns() - cpu_start) / len(pools) / 1e3)
    return min(cpu), min(wall)


def relevance_of(pool: Pool) -> np.ndarray:
    return np.asarray(pool.embeddings @ pool.query_embedding, dtype=np.float64)


def load_pyversity():
    try:
        import pyversity
    except Exception as error:  # noqa: BLE001 -- any import failure only disables the comparison column
        print(f"pyversity: unavailable ({type(error).__name__}: {error})")
        return None
    return pyversity


def agreement(pools: list[Pool], left: Callable[[Pool], object], right: Callable[[Pool], object]) -> str:
    same = sum(np.array_equal(np.asarray(left(p)), np.asarray(right(p))) for p in pools)
    return f"{same}/{len(pools)}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--questions", type=int, default=200, help="questions per timing pass")
    parser.add_argument("--loop-questions", type=int, default=5, help="questions for the (slow) plain loops")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    pyversity = load_pyversity()

    pools_1024 = make_questions(args.questions, 1024, args.seed)
    pools_384 = make_questions(args.questions, 384, args.seed + 1)
    # Kernel inputs are prepared once, outside the timed region, as a caller holding arrays would.
    arrays = {id(p): (p.embeddings, relevance_of(p)) for p in pools_1024 + pools_384}

    rng_div, mmr_div, dpp_div = RNGDiversifier("rng", K), MMRDiversifier("mmr", K), DPPDiversifier("dpp", K)
    methods = {
        "rng": {
            "pools": pools_1024,
            "kernel": lambda p: rng_select(*arrays[id(p)], K, 0.0),
            "pool": rng_div.select_indices,
            "loop": lambda p: rng_loop(*arrays[id(p)], K, 0.0),
        },
        "rng/full": {
            "pools": pools_1024,
            "kernel": lambda p: rng_select_full(*arrays[id(p)], K, 0.0),
            "pool": lambda p: rng_select_full(p.embeddings, query_similarity(p), K, 0.0),
            "loop": lambda p: rng_loop(*arrays[id(p)], K, 0.0),
        },
        "mmr": {
            "pools": pools_384,
            "kernel": lambda p: mmr_select(*arrays[id(p)], K, 0.5),
            "pool": mmr_div.select_indices,
            "loop": lambda p: mmr_loop(*arrays[id(p)], K, 0.5),
        },
        "dpp": {
            "pools": pools_384,
            "kernel": lambda p: dpp_greedy_map(*arrays[id(p)], K)[0],
            "pool": dpp_div.select_indices,
            "loop": lambda p: dpp_brute_force(*arrays[id(p)], K),
        },
    }
    if pyversity is not None:
        methods["mmr"]["pyversity"] = lambda p: pyversity.mmr(*arrays[id(p)], K, diversity=0.5, normalize=False).indices
        methods["dpp"]["pyversity"] = lambda p: pyversity.dpp(*arrays[id(p)], K, diversity=0.5).indices

    rows = []
    with threadpool_limits(limits=1):
        for name, spec in methods.items():
            pools = spec["pools"]
            loop_pools = pools[: args.loop_questions]
            row = {"method": name, "D": pools[0].embeddings.shape[1], "target": TARGETS_US[name]}
            row["kernel"] = per_question_us(spec["kernel"], pools, args.repeats)
            row["pool"] = per_question_us(spec["pool"], pools, args.repeats)
            row["loop"] = per_question_us(spec["loop"], loop_pools, 1)
            row["pyversity"] = per_question_us(spec["pyversity"], pools, args.repeats) if "pyversity" in spec else None
            row["same_as_loop"] = agreement(loop_pools, spec["kernel"], spec["loop"])
            if "pyversity" in spec:
                row["same_as_pyversity"] = agreement(pools, spec["kernel"], spec["pyversity"])
            else:
                row["same_as_pyversity"] = "-"
            rows.append(row)
        rng_same = agreement(pools_1024, methods["rng"]["kernel"], methods["rng/full"]["kernel"])

    print(
        f"\nm = {M}, k = {K}, one BLAS thread. Microseconds per question, thread CPU time (wall clock), best of "
        f"{args.repeats} passes over {args.questions} questions; plain loops: one pass over {args.loop_questions}.\n"
    )
    header = (
        f"{'method':<9}{'D':>6}{'target':>8}{'kernel':>16}{'pool':>16}{'plain loop':>12}{'loop/kernel':>13}"
        f"{'pyversity':>16}{'pyv/kernel':>12}{'= loop':>8}{'= pyv':>8}"
    )
    print(header)
    print("-" * len(header))

    def cell(figures: tuple[float, float] | None) -> str:
        return "unavailable" if figures is None else f"{figures[0]:.1f} ({figures[1]:.1f})"

    for r in rows:
        kernel_best = r["kernel"][0]
        py_ratio = "-" if r["pyversity"] is None else f"{r['pyversity'][0] / kernel_best:.2f}"
        print(
            f"{r['method']:<9}{r['D']:>6}{r['target']:>8.0f}{cell(r['kernel']):>16}{cell(r['pool']):>16}"
            f"{r['loop'][0]:>12.0f}{r['loop'][0] / kernel_best:>13.1f}{cell(r['pyversity']):>16}{py_ratio:>12}"
            f"{r['same_as_loop']:>8}{r['same_as_pyversity']:>8}"
        )
    print(
        "\nkernel: arrays in (as pyversity is called); pool: Diversifier.select_indices(pool). Ratios use CPU times."
        "\n'= loop' / '= pyv': questions with identical selections. pyversity's MMR clips cosines to [0, 1] and its"
        "\nDPP weights items by exp-z-scored relevance, so its selections differ from these by design."
        f"\nrng = rng/full (prefix shortcut vs whole Gram matrix): {rng_same} questions with identical selections."
    )


if __name__ == "__main__":
    main()
