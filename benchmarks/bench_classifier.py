"""DTCRS's question classifier against the annotated answer types: the LM by likelihood (summed and per-token
log-probability of each class's name as its reply, and that sum less the one a content-free question gets),
the LM generating its reply (rules when the reply names no class or several), the rules alone, and the
annotation (an oracle: its accuracy is 1 by construction). Accuracy on every annotated question of QASPER and
QuALITY, with 95% bootstrap intervals over questions, and for the generating LM how many replies parsed.

    .venv/bin/python benchmarks/bench_classifier.py [--data-dir DIR]

The files are those of the trees study (``paths.data_dir``: ``python -m harness.data fetch qasper quality_example``):
QASPER's 51 questions of 10 train papers (``dataset=qasper_train_first10``) and QuALITY's 2-article example file. The LM
is the trees' SmolLM2-135M: through transformers for likelihood, through llama.cpp (its GGUF, as the trees'
replication study runs it) for generation.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from harness.backends.offline_models import default_folder, ensure_offline_model
from harness.core.home import default_data_dir
from harness.data.quality import load_quality
from harness.lm.llama_cpp import LlamaCppChatLM
from harness.lm.local import LocalChatLM
from harness.stats.bootstrap import bootstrap_mean_ci
from harness.tree.questions import UNANNOTATED, annotated_question_class, classify_question

WAYS = (
    ("LM, likelihood (sum)", "lm", "likelihood", "sum"),
    ("LM, likelihood (per token)", "lm", "likelihood", "per_token"),
    ("LM, likelihood (calibrated)", "lm", "likelihood", "calibrated"),
    ("LM, generation (rules when unparsed)", "lm", "generation", "sum"),
    ("rules", "rules", "generation", "sum"),
    ("annotation (oracle)", "annotation", "generation", "sum"),
)


QASPER_IDS = Path(__file__).resolve().parents[1] / "harness/data/question_ids/qasper_train_first10.txt"


def questions(data_dir: Path) -> dict[str, list]:
    from harness.data.qasper import load_qasper

    return {
        "qasper": load_qasper(
            data_dir / "qasper" / "qasper-train-v0.3.json", chunk_tokens=500, question_ids_file=QASPER_IDS
        ),
        "quality": load_quality(data_dir / "quality" / "quality_example.jsonl", chunk_tokens=500),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", type=Path, default=default_data_dir())
    args = parser.parse_args()
    folder = ensure_offline_model("smollm2", default_folder("smollm2"))
    scorer = LocalChatLM(pretrained=str(folder), offline_model="smollm2", dtype="auto", torch_threads=2)
    generator = LlamaCppChatLM(name="smollm2-135m-gguf", offline_model="smollm2", llama_cpp={"n_ctx": 4096})
    print("| dataset | classifier | accuracy [95% CI] | n | LM replies parsed | s/question |")
    print("|---|---|---|---|---|---|")
    for dataset, examples in questions(args.data_dir).items():
        annotated = [(e.question, annotated_question_class(e).label) for e in examples]
        annotated = [(q, label) for q, label in annotated if label != UNANNOTATED]
        for title, mode, by, score in WAYS:
            lm = scorer if by == "likelihood" else generator
            start = time.perf_counter()
            decided = [classify_question(q, lm, mode, label, 8, by, score) for q, label in annotated]
            seconds = (time.perf_counter() - start) / len(annotated)
            hits = [float(d.label == label) for d, (_, label) in zip(decided, annotated, strict=True)]
            mean, low, high = bootstrap_mean_ci(hits, n_resamples=10000, seed=0)
            parsed = sum(bool(d.lm_parsed) for d in decided) if by == "generation" and mode == "lm" else None
            shown_parsed = f"{parsed}/{len(decided)}" if parsed is not None else "-"
            interval = f"[{low:.3f}, {high:.3f}]" if low == low else "(no interval)"
            print(f"| {dataset} | {title} | {mean:.3f} {interval} | {len(hits)} | {shown_parsed} | {seconds:.3f} |")


if __name__ == "__main__":
    main()
