"""Sweep reuse benchmark: a 4-budget x 4-policy x 2-seed sweep on shared HotpotQA questions.

Prints encoder computations per unique text, reader generations per unique prompt, and the wall time of
(a) a second identical launch into the same sweep directory (finished jobs are skipped) and (b) a launch into
a fresh directory with warm caches (every stage re-runs, embeddings and answers come from the caches),
each as a fraction of the first launch.

    .venv/bin/python benchmarks/bench_sweep.py [--questions 30]
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
HOTPOT = REPO.parent / "shared" / "data" / "hotpotqa" / "hotpot_dev_distractor_v1_100.json"


def launch(sweep_dir: Path, cache_dir: Path, questions: int) -> float:
    args = [
        sys.executable,
        "-m",
        "harness",
        "-m",
        "dataset=hotpotqa",
        f"dataset.path={HOTPOT}",
        f"dataset.sample_size={questions}",
        "logger=none",
        "budget=96,128,160,224",
        "packer=packed,focused,mmr,submod",
        "seed=42,13",
        f"hydra.sweep.dir={sweep_dir}",
    ]
    env = {**os.environ, "HARNESS_CACHE_DIR": str(cache_dir)}
    start = time.perf_counter()
    done = subprocess.run(args, check=False, cwd=REPO, env=env, capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        sys.exit(f"sweep failed:\n{done.stderr[-4000:]}")
    return elapsed


def table_rows(path: Path, table: str) -> int:
    with sqlite3.connect(path) as conn:
        return conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]


def counters(sweep_dir: Path) -> dict[str, int]:
    totals: dict[str, int] = {}
    for summary in sweep_dir.glob("*/summary.json"):
        for key, value in json.loads(summary.read_text())["counters"].items():
            totals[key] = totals.get(key, 0) + int(value or 0)
    return totals


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--questions", type=int, default=30)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        cache = tmp / "cache"
        first = launch(tmp / "sweep", cache, args.questions)
        first_counts = counters(tmp / "sweep")
        unique_texts = table_rows(cache / "embeddings.sqlite", "embeddings")
        unique_prompts = table_rows(cache / "responses.sqlite", "responses")
        again = launch(tmp / "sweep", cache, args.questions)
        warm = launch(tmp / "sweep_warm", cache, args.questions)
        warm_counts = counters(tmp / "sweep_warm")
    jobs = 4 * 4 * 2
    print(f"sweep: {jobs} jobs x {args.questions} questions (HotpotQA distractor sample), default models")
    print(f"first launch wall time                      {first:9.1f} s")
    print(
        f"encoder texts requested / computed / unique {first_counts['encoder_texts_requested']} / "
        f"{first_counts['encoder_texts_computed']} / {unique_texts}"
        f"  -> {first_counts['encoder_texts_computed'] / unique_texts:.2f} computations per unique text"
    )
    print(
        f"reader prompts requested / generated / unique {first_counts['reader_prompts_requested']} / "
        f"{first_counts['reader_prompts_generated']} / {unique_prompts}"
        f"  -> {first_counts['reader_prompts_generated'] / unique_prompts:.2f} generations per unique prompt"
    )
    print(f"second identical launch (same sweep dir)    {again:9.1f} s = {again / first:.1%} of the first")
    print(
        f"fresh sweep dir, warm caches                {warm:9.1f} s = {warm / first:.1%} of the first"
        f"  (encoder computed {warm_counts['encoder_texts_computed']}, reader generated "
        f"{warm_counts['reader_prompts_generated']})"
    )


if __name__ == "__main__":
    main()
