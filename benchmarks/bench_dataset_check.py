"""Seconds until a bad dataset file is reported: ``python -m harness dataset=... dataset.path=BAD`` (exit status
2, one line naming the file), the median of several runs per kind of bad file, each a fresh interpreter as on
the command line.

The dataset is read and checked with the config, before the pipeline's imports (pandas, scipy, torch), so this
is the interpreter's start, Hydra's composition, the data modules' imports and the read itself. The kinds:
a truncated JSON list, a record without a gold field, bytes that are not UTF-8, another benchmark's file
(the HotpotQA file in IRCoT's format given to ``dataset=musique_ircot``), a long-document file missing its text.

    python benchmarks/bench_dataset_check.py [--runs 3] [--repo PATH] [EXTRA OVERRIDES ...]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared" / "data"


def bad_files(folder: Path) -> dict[str, tuple[list[str], str]]:
    """Each kind of bad file: the overrides that name it and what the error line must hold."""
    records = json.loads((SHARED / "hotpotqa" / "hotpot_dev_distractor_v1_100.json").read_text())[:20]
    truncated = folder / "hotpot_truncated.json"
    text = json.dumps(records)
    truncated.write_text(text[: len(text) // 2])
    no_gold = folder / "hotpot_no_gold.json"
    no_gold.write_text(json.dumps([{k: v for k, v in records[0].items() if k != "supporting_facts"}]))
    not_utf8 = folder / "hotpot_latin1.json"
    not_utf8.write_bytes(text.encode().replace(b"the", b"th\xe9", 1))
    qasper = folder / "qasper.json"
    qasper.write_text(json.dumps({"p1": {"title": "T", "abstract": "A"}}))
    ircot = SHARED / "hotpotqa_ircot" / "hotpotqa_dev_subsampled_485.jsonl"
    return {
        "truncated JSON": (["dataset=hotpotqa", f"dataset.path={truncated}"], "invalid or truncated JSON"),
        "no gold field": (["dataset=hotpotqa", f"dataset.path={no_gold}"], "supporting_facts"),
        "not UTF-8": (["dataset=hotpotqa", f"dataset.path={not_utf8}"], "not UTF-8"),
        "another benchmark": (["dataset=musique_ircot", f"dataset.path={ircot}"], "dataset=hotpotqa_ircot"),
        "long document": (["dataset=qasper", f"dataset.path={qasper}"], "record 0"),
    }


def time_once(repo: Path, overrides: list[str], needle: str) -> float:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "WANDB_MODE": "disabled"}
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "harness", *overrides], cwd=repo, env=env, capture_output=True, text=True, check=False
    )
    seconds = time.perf_counter() - start
    if proc.returncode != 2 or needle not in proc.stderr:
        raise SystemExit(f"expected exit 2 naming {needle!r}, got {proc.returncode}:\n{proc.stderr[-2000:]}")
    return seconds


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--repo", type=Path, default=REPO, help="the checkout to run (default: this one)")
    parser.add_argument("overrides", nargs="*", help="more overrides, e.g. logger=none")
    args = parser.parse_args(argv)
    every = []
    with tempfile.TemporaryDirectory() as folder:
        for kind, (overrides, needle) in bad_files(Path(folder)).items():
            times = [time_once(args.repo, [*overrides, *args.overrides], needle) for _ in range(args.runs)]
            every += times
            print(f"{kind:18} runs (s): " + " ".join(f"{t:.2f}" for t in times))
    print(f"median over {len(every)} runs: {statistics.median(every):.2f} s")


if __name__ == "__main__":
    main()
