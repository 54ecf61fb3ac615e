"""Per-question time of the submodular packer against a plain-loop reference and apricot-select.

    python benchmarks/bench_submodular.py [--questions 50] [--snippets 100] [--dim 384] [--budgets 96 160 320]

Needs the ``bench`` extra for the apricot column (``pip install -e .[bench]``); without it that column
reads "unavailable".

Every question gets fresh random snippets (seeded): texts drawn from a small vocabulary, unit-norm
random embeddings, reader cost = words. Columns, all per question under one BLAS thread, in process
CPU milliseconds by default (``--clock wall`` for wall time):

- ``pack cold``: ``SubmodularPacker.pack`` end to end, every snippet's content terms computed afresh;
- ``pack warm``: the same with the term cache filled (a budget sweep repacks the same snippets);
- ``kernel``: objective set-up plus cost-scaled greedy on precomputed features and similarities;
- ``loop``: the plain-Python-loop reference (tests/helpers/reference.py) on the same inputs (similarities
  from NumPy);
- ``apricot FL``: apricot-select's budgeted ``FacilityLocationSelection`` (lazy greedy, precomputed
  similarity, per-snippet costs) for the Repr term alone, the closest library counterpart. Its public
  ``fit`` JIT-compiles its numba kernels on every call (apricot 0.6 builds them inside ``_initialize``
  without numba's cache), so that compile is part of its per-question cost.

The reference implementation is also the oracle that tests/test_pack_submodular.py compares the
vectorised packer against, so it is written for clarity: lists and loops, no NumPy.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_limits

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the loop reference lives with the tests

from harness.pack.features import snippet_features
from harness.pack.lexical import content_terms
from harness.pack.submod import (
    SubmodularObjective,
    SubmodularPacker,
    cost_scaled_greedy,
    snippet_similarity,
)
from tests.helpers.packing import random_request
from tests.helpers.reference import reference_greedy, reference_inputs


# ---- timing ----------------------------------------------------------------------------------------
def apricot_selector():
    try:
        from apricot import FacilityLocationSelection
    except (ImportError, AttributeError, OSError, RuntimeError, SystemError) as error:  # numba/numpy mismatches
        return None, f"{type(error).__name__}: {error}"
    return FacilityLocationSelection, ""


def apricot_budgeted_facility_location(selector, similarity: np.ndarray, costs: np.ndarray, budget: int):
    """apricot's lazy greedy under a knapsack budget on a precomputed similarity matrix.

    apricot refuses a budget larger than the number of items (it checks it as a count), so costs and
    budget are divided by the same factor when needed, which leaves every feasibility test unchanged.
    """
    scale = max(1.0, budget / similarity.shape[0])
    model = selector(budget / scale, metric="precomputed", optimizer="lazy")
    model.fit(similarity, sample_cost=costs.astype(np.float64) / scale)
    return model.ranking


CLOCKS = {"cpu": time.process_time, "wall": time.perf_counter}


def per_question_ms(function, items, repeats: int = 5, before=None, clock: str = "cpu") -> float:
    """Best of ``repeats`` runs over all items, in milliseconds per item.

    The default clock is this process's CPU time: on a shared machine, time spent descheduled while
    other jobs run is not the packer's cost. With one BLAS thread the two clocks agree on an idle machine.
    """
    now = CLOCKS[clock]
    best = float("inf")
    for _ in range(repeats):
        if before is not None:
            before()
        start = now()
        for item in items:
            function(item)
        best = min(best, (now() - start) / len(items))
    return 1000.0 * best


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--questions", type=int, default=50)
    parser.add_argument("--reference-questions", type=int, default=5, help="the loop reference is slow")
    parser.add_argument("--apricot-questions", type=int, default=3, help="apricot JIT-compiles on every fit")
    parser.add_argument("--snippets", type=int, default=100)
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--budgets", type=int, nargs="+", default=[96, 160, 320])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--clock", choices=sorted(CLOCKS), default="cpu", help="process CPU time or wall time")
    args = parser.parse_args(argv)

    packer = SubmodularPacker(name="submod")
    FacilityLocationSelection, apricot_error = apricot_selector()
    print(
        f"{args.snippets} snippets x {args.dim} dims, {args.questions} questions per budget, one BLAS thread, "
        f"best of {args.repeats}; {args.clock} ms per question"
    )
    if apricot_error:
        print(f"apricot-select unavailable: {apricot_error}")
    print(
        f"{'budget':>6} {'chosen':>6} {'pack cold':>9} {'pack warm':>9} {'kernel':>7} {'loop':>8} "
        f"{'apricot FL':>10} {'loop/pack':>9} {'apricot/pack':>12}"
    )
    with threadpool_limits(1):
        for budget in args.budgets:
            rng = np.random.default_rng([args.seed, budget])
            requests = [random_request(rng, args.snippets, args.dim, budget) for _ in range(args.questions)]
            # cold: every snippet text tokenised afresh; warm: a budget sweep repacking the same snippets
            cold_ms = per_question_ms(packer.pack, requests, args.repeats, content_terms.cache_clear, args.clock)
            warm_ms = per_question_ms(packer.pack, requests, args.repeats, clock=args.clock)

            prepared = [
                (snippet_features(r, packer.stem), snippet_similarity(r.snippet_embeddings), r.costs) for r in requests
            ]

            def kernel(item, budget=budget):
                features, similarity, costs = item
                objective = SubmodularObjective(
                    features.lexical, features.incidence, similarity, features.doc_codes, packer.weights, packer.alpha
                )
                return cost_scaled_greedy(objective, costs, budget, packer.max_snippets)

            kernel_ms = per_question_ms(kernel, prepared, args.repeats, clock=args.clock)
            chosen = np.mean([len(kernel(item).chosen) for item in prepared])

            subset = requests[: args.reference_questions]
            loop_inputs = [(reference_inputs(r, packer), r.costs.tolist()) for r in subset]
            loop_ms = per_question_ms(
                lambda item, budget=budget: reference_greedy(item[0], item[1], budget, packer.max_snippets),
                loop_inputs,
                repeats=1,
                clock=args.clock,
            )

            apricot_cell, ratio_cell = "unavailable", "unavailable"
            if FacilityLocationSelection is not None:
                clipped = [(np.maximum(similarity, 0.0), costs) for _, similarity, costs in prepared]

                def apricot_run(item, budget=budget):
                    return apricot_budgeted_facility_location(FacilityLocationSelection, item[0], item[1], budget)

                apricot_ms = per_question_ms(
                    apricot_run, clipped[: args.apricot_questions], repeats=1, clock=args.clock
                )
                apricot_cell, ratio_cell = f"{apricot_ms:.2f}", f"{apricot_ms / cold_ms:.1f}"
            print(
                f"{budget:>6} {chosen:6.1f} {cold_ms:9.3f} {warm_ms:9.3f} {kernel_ms:7.3f} {loop_ms:8.1f} "
                f"{apricot_cell:>10} {loop_ms / cold_ms:9.1f} {ratio_cell:>12}"
            )


if __name__ == "__main__":
    main()
