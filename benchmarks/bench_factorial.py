"""Seed 000's selection factorial: packings per second of a whole reader-free sweep, and where the time goes.

Runs ``python -m harness -m`` over packers x budgets x seeds on HotpotQA questions (by default the 485 of the
IRCoT fork's dev_subsampled.jsonl the replication studies read), ``read=false``, through the chosen Hydra
launcher. The questions come from the data folder runs read (``paths.data_dir``: ``$HARNESS_DATA_DIR`` or the
checkout's ``data/``), filled by
``python -m harness.data fetch hotpotqa_fork_dev_subsampled`` (or ``fetch hotpotqa``):

1. a warm-up launch that fills the caches (embeddings, pools) from nothing, timed as "cold";
2. the timed launch into a fresh sweep folder with warm caches: wall seconds, packings/s, the stage seconds
   summed over jobs (summary.json ``timings_s``), and the fixed seconds per job that no stage accounts for
   (process start, Hydra composition, output files);
3. with ``--profile N``, the same launch under cProfile, printing the N functions with the most own time
   and the N harness functions with the most cumulative time.

With ``--reader NAME`` the sweep reads too (on ``--questions`` questions), and the benchmark prints reader
generations beside the distinct prompts of the sweep (they must be equal: each prompt is generated once).

    .venv/bin/python benchmarks/bench_factorial.py                       # 5 packers x 4 budgets x 3 seeds x 485
    .venv/bin/python benchmarks/bench_factorial.py --profile 15
    .venv/bin/python benchmarks/bench_factorial.py --launcher local_parallel
    .venv/bin/python benchmarks/bench_factorial.py --questions 20 --budgets 96,160 --reader smollm2_135m_gguf
"""

from __future__ import annotations

import argparse
import collections
import io
import json
import os
import pstats
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

from harness.run.job_times import machine

REPO = Path(__file__).resolve().parents[1]
# The dataset config each choice runs, and what fetches its file. hotpotqa_fork_dev_subsampled keeps the sweep's 485
# questions; hotpotqa reads every question of its file (HotpotQA's distractor dev set; --questions samples it).
DATASETS = {"hotpotqa_fork_dev_subsampled": "hotpotqa_fork_dev_subsampled", "hotpotqa": "hotpotqa"}


def dataset_file(dataset: str) -> Path:
    """The file a run of ``dataset`` reads, as the run's own config composes it."""
    from hydra import compose, initialize_config_dir

    import harness  # noqa: F401  (registers the configs' ${harness_home:...})

    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
        return Path(compose(config_name="config", overrides=[f"dataset={dataset}"]).dataset.path)


def overrides(args: argparse.Namespace, sweep_dir: Path) -> list[str]:
    sample = "null" if args.questions is None else str(args.questions)
    listed = [
        "+sweeps=replication_packing",
        f"dataset={args.dataset}",
        *(["dataset.question_ids_file=null"] if args.dataset == "hotpotqa" else []),
        f"dataset.sample_size={sample}",
        f"packer={args.packers}",
        f"budget={args.budgets}",
        f"seed={args.seeds}",
        f"hydra.sweep.dir={sweep_dir}",
    ]
    if args.launcher != "basic":
        listed.append(f"hydra/launcher={args.launcher}")
    if args.reader:
        listed += [f"reader={args.reader}", "read=true"]
    return listed


def launch(args: argparse.Namespace, sweep_dir: Path, cache_dir: Path, profile_to: Path | None = None) -> float:
    command = [sys.executable]
    if profile_to is not None:
        command += ["-m", "cProfile", "-o", str(profile_to)]
    command += ["-m", "harness", "-m", *overrides(args, sweep_dir)]
    env = {**os.environ, "HARNESS_CACHE_DIR": str(cache_dir), "WANDB_MODE": "disabled"}
    start = time.perf_counter()
    done = subprocess.run(command, check=False, cwd=REPO, env=env, capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        sys.exit(f"sweep failed ({' '.join(command)}):\n{done.stderr[-4000:]}")
    return elapsed


def sweep_figures(sweep_dir: Path) -> dict:
    """Jobs, packings (rows), stage seconds and counters summed over the sweep's jobs, distinct prompts."""
    stages: collections.Counter = collections.Counter()
    counters: collections.Counter = collections.Counter()
    jobs = packings = 0
    prompts = set()
    for summary_file in sorted(sweep_dir.glob("*/summary.json")):
        summary = json.loads(summary_file.read_text())
        jobs += 1
        packings += int(summary["n_questions"])
        stages.update(summary.get("timings_s", {}))
        counters.update({k: v for k, v in summary.get("counters", {}).items() if v is not None})
        rows = pd.read_parquet(summary_file.parent / "rows.parquet", columns=["question", "context", "reader"])
        prompts.update(zip(rows["reader"], rows["question"], rows["context"], strict=True))
    return {"jobs": jobs, "packings": packings, "stages": stages, "counters": counters, "prompts": len(prompts)}


def print_profile(path: Path, top: int) -> None:
    stream = io.StringIO()
    stats = pstats.Stats(str(path), stream=stream)
    stats.sort_stats("tottime").print_stats(top)
    print("\n-- own time (all functions) --")
    print("\n".join(line[:160] for line in stream.getvalue().splitlines()[6:]))
    stream.seek(0)
    stream.truncate()
    stats.sort_stats("cumulative").print_stats(r"/harness/", top)
    print("-- cumulative time (harness functions) --")
    print("\n".join(line[:160] for line in stream.getvalue().splitlines()[6:]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", choices=sorted(DATASETS), default="hotpotqa_fork_dev_subsampled")
    parser.add_argument("--questions", type=int, default=None, help="questions per seed (default: all)")
    parser.add_argument("--packers", default="packed,focused,mmr,submod,oracle")
    parser.add_argument("--budgets", default="96,128,160,224")
    parser.add_argument("--seeds", default="42,13,7")
    parser.add_argument("--launcher", default="basic", help="basic, or a conf/hydra/launcher option")
    parser.add_argument("--reader", default=None, help="a reader config: the sweep reads (read=true)")
    parser.add_argument("--cache-dir", type=Path, default=None, help="reuse a cache folder (default: a new one)")
    parser.add_argument("--profile", type=int, default=0, metavar="N", help="profile a third launch; print top N")
    args = parser.parse_args()
    data = dataset_file(args.dataset)
    if not data.exists():
        sys.exit(f"{data} not found: fetch it first (python -m harness.data fetch {DATASETS[args.dataset]})")

    with tempfile.TemporaryDirectory(prefix="bench-factorial-") as tmp:
        tmp_dir = Path(tmp)
        cache_dir = args.cache_dir or tmp_dir / "cache"
        cold = launch(args, tmp_dir / "cold", cache_dir)
        warm = launch(args, tmp_dir / "warm", cache_dir)
        cold_figures, figures = sweep_figures(tmp_dir / "cold"), sweep_figures(tmp_dir / "warm")
        jobs, packings, stages = figures["jobs"], figures["packings"], figures["stages"]
        staged = sum(stages.values())
        print(f"machine: {machine()}; launcher={args.launcher}; dataset={args.dataset}")
        print(
            f"sweep: packer={args.packers} x budget={args.budgets} x seed={args.seeds}: "
            f"{jobs} jobs, {packings} packings"
        )
        print(f"cold caches: {cold:7.1f} s  {packings / cold:7.1f} packings/s")
        print(f"warm caches: {warm:7.1f} s  {packings / warm:7.1f} packings/s  (target 450/s: {packings / 450:.0f} s)")
        print("stage seconds summed over jobs (warm):")
        for stage, seconds in sorted(stages.items(), key=lambda kv: -kv[1]):
            print(f"  {stage:<10} {seconds:7.1f} s  {1000 * seconds / max(packings, 1):6.2f} ms/packing")
        print(f"  {'(fixed)':<10} {warm - staged:7.1f} s  {(warm - staged) / max(jobs, 1):6.2f} s/job")
        counters = figures["counters"]
        print(
            f"jobs that reused another job's work (same pools in this process): "
            f"selections {counters.get('selections_reused', 0)} of {jobs}, "
            f"packings {counters.get('packings_reused', 0)} of {jobs}"
        )
        if args.reader:
            generated = cold_figures["counters"].get("reader_prompts_generated", 0)
            print(
                f"reader {args.reader}: {generated} generations for {cold_figures['prompts']} distinct prompts "
                f"(cold); {figures['counters'].get('reader_prompts_generated', 0)} generations (warm)"
            )
        if args.profile:
            profile = tmp_dir / "sweep.prof"
            launch(args, tmp_dir / "profiled", cache_dir, profile_to=profile)
            print_profile(profile, args.profile)


if __name__ == "__main__":
    main()
