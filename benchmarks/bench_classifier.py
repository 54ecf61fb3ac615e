"""DTCRS's question classifier against the annotated answer types, for every offline LM and every way the harness
can ask: by likelihood (each class's name scored as the reply: summed, per token, and calibrated against a
content-free question) and by generation (the reply parsed; rules when it names no class or several), each with
the zero-shot and the few-shot prompt (harness/tree/classify_prompts.py); and two designs a careful reader of
the paper would try next (``--designs``): the classes in plain words the model knows better than the labels
(``plain words``, by likelihood), and one yes/no question per class (``yes/no per class``: the class whose
question gets the largest log P(yes) - log P(no), also calibrated against the content-free question). The rules
and the annotation (an oracle) beside them. Accuracy with a 95% bootstrap interval over questions, recall per
annotated class with Wilson intervals, a confusion matrix per design, and for generation how many replies parsed.

    .venv/bin/python benchmarks/bench_classifier.py [--lms smollm2,qwen2.5-coder-0.5b,qwen2.5-coder-1.5b]
        [--prompts zero_shot,few_shot] [--designs labels,plain,per_class] [--data-dir DIR]
        [--out outputs/bench_classifier]

The questions are those of the trees study (``paths.data_dir``: ``python -m harness.data fetch qasper
quality_example``): QASPER's 51 questions of 10 train papers (``dataset=qasper_train_first10``) and QuALITY's
2-article example file. Each LM scores through transformers (its dequantised folder) and generates through
llama.cpp (its GGUF), as the trees study runs it; the 1.5B needs ``make models-1.5b``. Every decision goes to
``OUT/decisions.csv`` and the tables to ``OUT/classifier.md``.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import pandas as pd

from harness.backends.offline_models import default_folder, ensure_offline_model, gguf_path
from harness.core.home import default_data_dir
from harness.data.quality import load_quality
from harness.report.formatting import to_markdown
from harness.stats.bootstrap import bootstrap_mean_ci
from harness.tree.classify_prompts import classify_prompt
from harness.tree.questions import (
    CLASS_REPLIES,
    CLASSIFY_SCORES,
    CONTENT_FREE_QUESTION,
    QUESTION_CLASSES,
    UNANNOTATED,
    annotated_question_class,
    classify_question,
    likelihood_scores,
)

QASPER_IDS = Path(__file__).resolve().parents[1] / "harness/data/question_ids/qasper_train_first10.txt"
LMS = ("smollm2", "qwen2.5-coder-0.5b", "qwen2.5-coder-1.5b")
DESIGNS = ("labels", "plain", "per_class")

# The classes in the words of an answer rather than as labels: a small LM may know "yes or no" better than
# "yes/no" as a reply, and "a phrase copied from the document" better than "extractive".
PLAIN_REPLIES = {
    "extractive": "a phrase copied from the document",
    "abstractive": "an explanation in new words",
    "yes_no": "yes or no",
    "unanswerable": "nothing, the document does not say",
}
PLAIN_PROMPT = (
    "What kind of answer does this question about a document need?\n\nQuestion: {question}\n\nReply with one of: "
    + "; ".join(PLAIN_REPLIES.values())
    + "."
)
# One yes/no question per class, each answerable on its own: no reply has to name a label at all.
PER_CLASS_QUESTIONS = {
    "extractive": "Can it be answered by copying a short phrase (a name, a number, a term) from the document?",
    "abstractive": "Does its answer need an explanation in new words, combining several parts of the document?",
    "yes_no": "Is its answer simply yes or no?",
    "unanswerable": "Is it a question the document itself could not answer?",
}
PER_CLASS_PROMPT = "Here is a question about a document.\n\nQuestion: {question}\n\n{ask} Reply yes or no."


def questions(data_dir: Path) -> dict[str, list[tuple[str, str]]]:
    """(question, annotated class) of every annotated question, per dataset."""
    from harness.data.qasper import load_qasper

    examples = {
        "qasper": load_qasper(
            data_dir / "qasper" / "qasper-train-v0.3.json", chunk_tokens=500, question_ids_file=QASPER_IDS
        ),
        "quality": load_quality(data_dir / "quality" / "quality_example.jsonl", chunk_tokens=500),
    }
    annotated = {
        name: [(e.question, annotated_question_class(e).label) for e in found] for name, found in examples.items()
    }
    return {name: [(q, label) for q, label in pairs if label != UNANNOTATED] for name, pairs in annotated.items()}


def language_models(name: str):
    """(scorer through transformers, generator through llama.cpp) of an offline LM, or None when absent."""
    from harness.lm.llama_cpp import LlamaCppChatLM
    from harness.lm.local import LocalChatLM

    try:
        gguf_path(name)
    except FileNotFoundError as error:
        print(f"{name}: skipped: {error}")
        return None
    folder = ensure_offline_model(name, default_folder(name))
    scorer = LocalChatLM(pretrained=str(folder), offline_model=name, dtype="auto", name=name)
    generator = LlamaCppChatLM(offline_model=name, llama_cpp={"n_ctx": 4096}, name=f"{name}-gguf")
    return scorer, generator


def decisions(lm: str, scorer, generator, prompt: str, asked: dict[str, list[tuple[str, str]]]) -> list[dict]:
    """One row per (dataset, question, design) for this LM and prompt: the likelihood designs share one scoring
    of the four replies per question (and one of the content-free question), so each is read off the same
    numbers."""
    template, replies = classify_prompt(prompt), [CLASS_REPLIES[c] for c in QUESTION_CLASSES]
    rows = []
    prior = scorer.continuation_logprobs(template.format(question=CONTENT_FREE_QUESTION), replies)
    for dataset, pairs in asked.items():
        for question, annotated in pairs:
            asked_one = (dataset, question, annotated)
            rows += _likelihood_rows(lm, prompt, "likelihood", scorer, template, replies, prior, asked_one)
            start = time.perf_counter()
            decided = classify_question(question, generator, "lm", annotated, 8, "generation", "sum", prompt)
            seconds = time.perf_counter() - start
            rows.append(
                _row(lm, prompt, "generation", dataset, question, annotated, decided.label, seconds, decided.lm_parsed)
            )
    return rows


def _likelihood_rows(lm, prompt, way, scorer, template, replies, prior, asked_one) -> list[dict]:
    """One row per likelihood score (summed, per token, calibrated by ``prior``), all read off one scoring of the
    ``replies`` after ``template`` filled with the question of ``asked_one`` (dataset, question, annotated)."""
    dataset, question, annotated = asked_one
    start = time.perf_counter()
    logprobs = scorer.continuation_logprobs(template.format(question=question.strip()), replies)
    seconds = time.perf_counter() - start
    rows = []
    for score in CLASSIFY_SCORES:
        scores = likelihood_scores(logprobs, score, prior)
        label = max(QUESTION_CLASSES, key=lambda c: scores[c])
        rows.append(_row(lm, prompt, f"{way}, {score}", dataset, question, annotated, label, seconds))
    return rows


def further_decisions(lm: str, scorer, asked: dict[str, list[tuple[str, str]]]) -> list[dict]:
    """The plain-words and yes/no-per-class designs, by likelihood through the transformers scorer."""
    plain = [PLAIN_REPLIES[c] for c in QUESTION_CLASSES]
    plain_prior = scorer.continuation_logprobs(PLAIN_PROMPT.format(question=CONTENT_FREE_QUESTION), plain)
    yes_prior = _yes_margins(scorer, CONTENT_FREE_QUESTION)
    rows = []
    for dataset, pairs in asked.items():
        for question, annotated in pairs:
            asked_one = (dataset, question, annotated)
            rows += _likelihood_rows(lm, "plain", "plain words", scorer, PLAIN_PROMPT, plain, plain_prior, asked_one)
            start = time.perf_counter()
            margins = _yes_margins(scorer, question.strip())
            seconds = time.perf_counter() - start
            for way, prior in (("yes/no per class", None), ("yes/no per class, calibrated", yes_prior)):
                label = max(QUESTION_CLASSES, key=lambda c: margins[c] - (prior[c] if prior else 0.0))
                rows.append(_row(lm, "per_class", way, dataset, question, annotated, label, seconds))
    return rows


def _yes_margins(scorer, question: str) -> dict[str, float]:
    """log P(yes) - log P(no) of each class's yes/no question about ``question``."""
    margins = {}
    for cls in QUESTION_CLASSES:
        prompt = PER_CLASS_PROMPT.format(question=question, ask=PER_CLASS_QUESTIONS[cls])
        yes, no = scorer.continuation_logprobs(prompt, ["yes", "no"])
        margins[cls] = sum(yes) - sum(no)
    return margins


def _row(lm, prompt, way, dataset, question, annotated, label, seconds, parsed=None) -> dict:
    return {
        "lm": lm, "prompt": prompt, "way": way, "dataset": dataset, "question": question,
        "annotated": annotated, "decided": label, "seconds": seconds, "parsed": parsed,
    }  # fmt: skip


def baselines(asked: dict[str, list[tuple[str, str]]]) -> list[dict]:
    rows = []
    for dataset, pairs in asked.items():
        for question, annotated in pairs:
            for mode in ("rules", "annotation"):
                label = classify_question(question, None, mode, annotated).label
                rows.append(_row("-", "-", mode, dataset, question, annotated, label, 0.0))
    return rows


def summary(frame: pd.DataFrame) -> pd.DataFrame:
    """Accuracy [95% CI], recall per annotated class [Wilson 95%], replies parsed, seconds per question."""
    from statsmodels.stats.proportion import proportion_confint

    out = []
    for (dataset, lm, prompt, way), group in frame.groupby(["dataset", "lm", "prompt", "way"], sort=False):
        hits = (group["decided"] == group["annotated"]).astype(float).tolist()
        mean, low, high = bootstrap_mean_ci(hits, n_resamples=10000, seed=0)
        row = {"dataset": dataset, "lm": lm, "prompt": prompt, "way": way, "n": len(hits)}
        row["accuracy [95% CI]"] = f"{mean:.3f} [{low:.3f}, {high:.3f}]" if low == low else f"{mean:.3f}"
        for cls in QUESTION_CLASSES:
            of = group[group["annotated"] == cls]
            if len(of):
                right = int((of["decided"] == cls).sum())
                lo, hi = proportion_confint(right, len(of), method="wilson")
                row[f"recall {cls}"] = f"{right}/{len(of)} [{lo:.2f}, {hi:.2f}]"
        parsed = group["parsed"].dropna()
        row["parsed"] = f"{int(parsed.sum())}/{len(parsed)}" if len(parsed) else "-"
        row["s/question"] = round(float(group["seconds"].mean()), 3)
        out.append(row)
    return pd.DataFrame(out).fillna("-")


def confusion(frame: pd.DataFrame, dataset: str, lm: str, prompt: str, way: str) -> pd.DataFrame:
    chosen = frame[(frame.dataset == dataset) & (frame.lm == lm) & (frame.prompt == prompt) & (frame.way == way)]
    table = pd.crosstab(chosen["annotated"], chosen["decided"]).reindex(
        index=QUESTION_CLASSES, columns=QUESTION_CLASSES, fill_value=0
    )
    return table.rename_axis(index="annotated \\ decided", columns=None)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", type=Path, default=default_data_dir())
    parser.add_argument("--lms", default=",".join(LMS))
    parser.add_argument("--prompts", default="zero_shot,few_shot")
    parser.add_argument(
        "--designs", default=",".join(DESIGNS), help="labels (both prompts, both ways), plain, per_class"
    )
    parser.add_argument("--out", type=Path, default=Path("outputs/bench_classifier"))
    args = parser.parse_args()
    asked = questions(args.data_dir)
    rows = baselines(asked)
    args.out.mkdir(parents=True, exist_ok=True)
    for lm in args.lms.split(","):
        models = language_models(lm)
        if models is None:
            continue
        designs = args.designs.split(",")
        for prompt in args.prompts.split(",") if "labels" in designs else []:
            start = time.perf_counter()
            rows += decisions(lm, *models, prompt, asked)
            print(f"{lm} {prompt}: {time.perf_counter() - start:.0f} s", flush=True)
            pd.DataFrame(rows).to_csv(args.out / "decisions.csv", index=False)  # kept if a later LM dies
        if {"plain", "per_class"} & set(designs):
            start = time.perf_counter()
            further = further_decisions(lm, models[0], asked)
            rows += [r for r in further if r["prompt"] in designs]
            print(f"{lm} plain words, yes/no per class: {time.perf_counter() - start:.0f} s", flush=True)
            pd.DataFrame(rows).to_csv(args.out / "decisions.csv", index=False)
    frame = pd.DataFrame(rows)
    table = summary(frame)
    lines = [to_markdown(table), ""]
    best = table[table.lm != "-"].assign(acc=lambda t: t["accuracy [95% CI]"].str.split().str[0].astype(float))
    for dataset, group in best.groupby("dataset"):
        top = group.sort_values("acc", ascending=False).iloc[0]
        lines += [f"Confusion, {dataset}, best LM design ({top.lm}, {top.prompt}, {top.way}):", ""]
        lines += [to_markdown(confusion(frame, dataset, top.lm, top.prompt, top.way).reset_index()), ""]
    for dataset in asked:
        lines += [
            f"Confusion, {dataset}, rules:",
            "",
            to_markdown(confusion(frame, dataset, "-", "-", "rules").reset_index()),
            "",
        ]
    text = "\n".join(lines)
    (args.out / "classifier.md").write_text(text, encoding="utf-8")
    frame.to_csv(args.out / "decisions.csv", index=False)
    print(text)


if __name__ == "__main__":
    main()
