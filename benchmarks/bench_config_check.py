"""Seconds until an invalid config is reported: ``python -m harness budget=0`` (exit status 2, one line
naming ``budget``), the median of several runs, each a fresh interpreter as on the command line.

The config check runs before the pipeline's imports (pandas, scipy, torch) and before any model loads, so
this is the interpreter's start, Hydra's composition and the check itself; the imports behind it are in
``python -X importtime -m harness budget=0``.

    python benchmarks/bench_config_check.py [--runs 5] [--repo PATH] [EXTRA OVERRIDES ...]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def time_once(repo: Path, overrides: list[str]) -> float:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "WANDB_MODE": "disabled"}
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "harness", "budget=0", *overrides],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    seconds = time.perf_counter() - start
    if proc.returncode != 2 or "budget" not in proc.stderr:
        raise SystemExit(f"expected exit 2 naming budget, got {proc.returncode}:\n{proc.stderr[-2000:]}")
    return seconds


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--repo", type=Path, default=REPO, help="the checkout to run (default: this one)")
    parser.add_argument("overrides", nargs="*", help="more overrides, e.g. logger=none")
    args = parser.parse_args(argv)
    times = [time_once(args.repo, args.overrides) for _ in range(args.runs)]
    print(f"python -m harness budget=0 {' '.join(args.overrides)}".rstrip())
    print("runs (s): " + " ".join(f"{t:.2f}" for t in times))
    print(f"median: {statistics.median(times):.2f} s")


if __name__ == "__main__":
    main()
