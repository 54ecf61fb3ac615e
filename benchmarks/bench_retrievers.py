"""MiniLM, BM25 and their hybrid on HotpotQA fullwiki (the first 250 questions of AMOR's copy,
dataset=hotpotqa_fullwiki_amor): recall@k, S-Recall@k and answer-in-context at B reader tokens, each with a 95%
bootstrap interval over questions.

Runs one selection-only sweep (``read=false``: no reader calls) of ``retriever=minilm,bm25,hybrid`` in both
retrieval settings (``distractor``: each question's own paragraphs; ``open``: one corpus of every question's
paragraphs), with ``diversifier=none`` so the packer reads each retriever's own ranking (the kNN diversifier
would re-rank any pool by MiniLM cosine), then prints one markdown row per retriever and setting from the
sweep's rows. The pools hold ``--pool-size`` candidates; recall@k is over the pool's first k, S-Recall@k over
the selection's first k (the same documents here, counted against the gold the pool could reach). BM25 and the
hybrid are also compared with MiniLM question by question: the mean paired difference in recall@k and in
answer-in-context, with its paired-bootstrap interval.

    .venv/bin/python benchmarks/bench_retrievers.py [--questions 250] [--budget 160] [--k 5]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd

from harness.backends.precision import machine_cpu_kind
from harness.core.threads import available_cpus
from harness.stats.bootstrap import bootstrap_mean_ci, paired_bootstrap

ROOT = Path(__file__).resolve().parents[1]
DATA = "../shared/data/hotpotqa_fullwiki/hotpot_fullwiki_dev_sample.jsonl"
RETRIEVERS = ("minilm", "bm25", "hybrid")
SETTINGS = ("distractor", "open")
METRICS = {"recall_at_k": "recall@k", "s_recall": "S-Recall@k", "answer_in_context": "answer in context"}
# Compared with the baseline question by question.
PAIRED = ("recall_at_k", "answer_in_context")
BASELINE = "minilm"


def sweep_command(args: argparse.Namespace) -> list[str]:
    """The harness sweep behind the table (the documented command runs it from the repository root)."""
    return [
        "-m",
        f"retriever={','.join(RETRIEVERS)}",
        f"retriever.setting={','.join(SETTINGS)}",
        f"retriever.pool_size={args.pool_size}",
        "dataset=hotpotqa_fullwiki_amor",
        f"dataset.path={args.data}",
        f"dataset.sample_size={args.questions or 'null'}",
        "diversifier=none",
        "packer=packed",
        f"budget={args.budget}",
        f"k={args.k}",
        "read=false",
        "logger=none",
        f"hydra.sweep.dir={args.out}",
    ]


def table(rows: pd.DataFrame, resamples: int) -> list[dict]:
    """One figure set per retriever and setting: n and each metric's mean with its interval."""
    figures = []
    for setting in SETTINGS:
        runs = {
            retriever: rows[(rows["retriever"] == retriever) & (rows["cfg.retriever.setting"] == setting)]
            for retriever in RETRIEVERS
        }
        baseline = runs[BASELINE].set_index("question_id")
        for retriever, part in runs.items():
            entry: dict = {"retriever": retriever, "setting": setting, "n": int(part["question_id"].nunique())}
            for column in METRICS:
                mean, low, high = bootstrap_mean_ci(part[column].astype(float), n_resamples=resamples, seed=0)
                entry[column] = {"mean": mean, "low": low, "high": high, "n": int(part[column].notna().sum())}
            if retriever != BASELINE:
                mine = part.set_index("question_id").reindex(baseline.index)
                entry["vs_" + BASELINE] = {
                    column: paired_bootstrap(
                        mine[column].astype(float), baseline[column].astype(float), n_resamples=resamples, seed=0
                    )
                    for column in PAIRED
                }
            figures.append(entry)
    return figures


def markdown(figures: list[dict], k: int, budget: int) -> str:
    names = {c: METRICS[c].replace("@k", f"@{k}") for c in METRICS}
    names["answer_in_context"] = f"answer in context (B = {budget})"
    head = ["setting", "retriever", "questions", *names.values(), *(f"Δ{names[c]} vs {BASELINE}" for c in PAIRED)]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for entry in figures:
        cells = [
            f"{entry[c]['mean']:.3f} [{entry[c]['low']:.3f}, {entry[c]['high']:.3f}]" + (
                f" (n = {entry[c]['n']})" if entry[c]["n"] != entry["n"] else ""
            )
            for c in METRICS
        ]  # fmt: skip
        paired = entry.get("vs_" + BASELINE)
        cells += [
            f"{paired[c]['mean_diff']:+.3f} [{paired[c]['ci_low']:+.3f}, {paired[c]['ci_high']:+.3f}]" if paired else ""
            for c in PAIRED
        ]
        lines.append(f"| {entry['setting']} | {entry['retriever']} | {entry['n']} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=DATA, help="the fullwiki file (relative to the repository root)")
    parser.add_argument("--questions", type=int, default=None, help="a seeded sample of N questions (default: all)")
    parser.add_argument("--budget", type=int, default=160, help="reader tokens of the packed context")
    parser.add_argument("--k", type=int, default=5, help="the k of recall@k and S-Recall@k")
    parser.add_argument("--pool-size", type=int, default=10, help="candidates each pool keeps")
    parser.add_argument("--resamples", type=int, default=2000, help="bootstrap resamples per interval")
    parser.add_argument("--out", type=Path, default=ROOT / "outputs" / "bench-retrievers", help="the sweep folder")
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here")
    args = parser.parse_args()

    command = [sys.executable, "-m", "harness", *sweep_command(args)]
    args.out.mkdir(parents=True, exist_ok=True)
    log = args.out / "sweep.log"  # the jobs' own output: their stage lines and summaries
    with log.open("w") as handle:
        done = subprocess.run(
            command, cwd=ROOT, env={**os.environ, "WANDB_MODE": "disabled"}, stdout=handle, stderr=handle
        )
    if done.returncode != 0:
        raise SystemExit(f"the sweep failed (exit {done.returncode}; its output: {log}): {' '.join(command[1:])}")
    rows = pd.concat(pd.read_parquet(p) for p in sorted(Path(args.out).glob("*/rows.parquet")))
    figures = table(rows, args.resamples)
    print(
        f"\nCPU kind {machine_cpu_kind()} ({available_cpus()} threads); {Path(args.data).name}, "
        f"{figures[0]['n']} questions; pools of {args.pool_size}; 95% bootstrap intervals over questions\n"
        f"python {' '.join(command[1:])}\n"
    )
    print(markdown(figures, args.k, args.budget))
    if args.json is not None:
        args.json.write_text(json.dumps(figures, indent=1))


if __name__ == "__main__":
    main()
