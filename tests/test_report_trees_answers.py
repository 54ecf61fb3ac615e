"""Seed 002's answer verdicts on the replication page: DTCRS against RAPTOR and the dense baseline on the answer
metric of each dataset, by annotated type, and Table 6's "helps abstractive questions most" as a difference in
differences, each figure worked out by hand from a small trees study."""

from __future__ import annotations

import json

import pandas as pd

from harness.report.replication import TREES, Settings, render
from harness.report.replication.document import rebuild_sections
from harness.report.replication.trees_answers import QASPER_HF_EXPORT_SHA256
from tests.helpers.report_rows import write_sweep

# q1-q3 annotated abstractive, q4-q6 extractive; DTCRS (lm) built trees for q1-q3 only.
QIDS = ["q1", "q2", "q3", "q4", "q5", "q6"]
ANNOTATED = ["abstractive"] * 3 + ["extractive"] * 3
F1 = {
    "none": [0.2, 0.2, 0.2, 0.5, 0.5, 0.5],
    "raptor": [0.3, 0.1, 0.2, 0.5, 0.4, 0.6],
    "dtcrs": [0.6, 0.5, 0.4, 0.5, 0.5, 0.5],
}


FILES = {"qasper": "data/qasper/qasper-train-v0.3.json", "quality": "data/quality/quality_example.jsonl"}


def _frame(tree: str, dataset: str, values: list[float], qids: list[str]) -> pd.DataFrame:
    metric = "qasper_f1" if dataset == "qasper" else "quality_correct"
    data = pd.DataFrame(
        {
            "question_id": qids,
            "dataset": dataset,
            "tree": tree,
            "seed": 42,
            "budget": 512,
            "reader": "tiny-reader",
            "qtype": "extractive",  # the loader's type: the annotated class of the DTCRS rows takes precedence
            "cfg.dataset.split": "train" if dataset == "qasper" else None,
            "cfg.dataset.path": FILES[dataset],
            metric: values,
        }
    )
    data["context"] = [f"chunks of {q}" for q in qids]
    if tree == "dtcrs":
        treed = [c == "abstractive" for c in ANNOTATED[: len(qids)]]
        # Treed questions' pools rank a summary third, behind two chunks; q1's context alone holds it (20 tokens).
        summary = json.dumps([{"kind": "document", "score": 0.9}, {"kind": "document", "score": 0.8},
                              {"kind": "summary", "score": 0.7}])  # fmt: skip
        data["pool"] = [summary if t else json.dumps([{"kind": "document", "score": 0.9}]) for t in treed]
        data["n_candidates"] = [3 if t else 1 for t in treed]
        data["snippets"] = [json.dumps([{"kind": "summary", "tok": 20}] if q == "q1" else []) for q in qids]
        data.loc[data["question_id"] == "q1", "context"] = "a summary and chunks of q1"
        data["tree.classifier"] = "lm"
        data["tree.annotated_class"] = ANNOTATED[: len(qids)] if dataset == "qasper" else "abstractive"
        data["tree.summary_nodes"] = [3 if c == "abstractive" else 0 for c in ANNOTATED[: len(qids)]]
    if tree != "none":
        data["tree.summary_nodes"] = data.get("tree.summary_nodes", 5)
        data["tree.build_seconds"], data["tree.cached"] = 1.0, False
    return data


def test_dtcrs_answers_are_paired_with_each_baseline_overall_by_type_and_on_quality(tmp_path):
    frames = [_frame(tree, "qasper", values, QIDS) for tree, values in F1.items()]
    frames += [
        _frame("none", "quality", [0.0, 1.0, 0.0], QIDS[:3]),
        _frame("dtcrs", "quality", [1.0, 1.0, 0.0], QIDS[:3]),
    ]
    studies = tmp_path / "studies"
    write_sweep(studies / TREES.directory, frames)
    text = render(Settings(studies, tmp_path / "r.md", 300))
    section = text[text.index("## Seed 002: answers from DTCRS") :]
    assert (
        "**not the paper's GPT-4**" in section
        and "tiny-reader" in section
        and "The 6 QASPER questions come from papers of QASPER's **train** split" in section
    )
    assert "The 3 QuALITY questions are those of the repository's example file" in section
    lines = section.splitlines()
    # DTCRS − dense: 0.4, 0.3, 0.2 on the treed questions, 0 elsewhere: mean 0.150; 3 won, 0 lost.
    dense = next(line for line in lines if line.startswith("| qasper | all | dtcrs (lm) − dense |"))
    assert "| 0.150 [" in dense and "| 3/0 | 6 |" in dense
    # DTCRS − RAPTOR: 0.3, 0.4, 0.2, 0, 0.1, −0.1: mean 0.150, 4 won, 1 lost; on abstractive 0.300, on extractive 0.
    raptor = next(line for line in lines if line.startswith("| qasper | all | dtcrs (lm) − raptor |"))
    assert "| 0.150 [" in raptor and "| 4/1 | 6 |" in raptor
    by_type = next(line for line in lines if line.startswith("| qasper | abstractive | dtcrs (lm) − raptor"))
    assert "| 0.300 [" in by_type and "| 3/0 | 3 |" in by_type
    extractive = next(line for line in lines if line.startswith("| qasper | extractive | dtcrs (lm) − raptor"))
    assert "| 0.000 [" in extractive and "| 1/1 | 3 |" in extractive
    # Table 6: gain on abstractive (0.300) minus gain on the others (0.000).
    assert "- dtcrs (lm) − raptor: gain on abstractive minus gain on the others +0.300 [" in section
    assert "| seed 002 answers: dtcrs (lm) gains most over raptor on abstractive questions (qasper) |" in text
    # The means table: dense 0.350 over all six, DTCRS 0.500 on the three abstractive ones.
    assert "| qasper | answer F1 | all | 6 | 0.350 [" in section
    assert "| qasper | answer F1 | abstractive | 3 | 0.200 [" in section
    # QuALITY: accuracy 1/3 vs 2/3, paired: +0.333 on 3 questions; no RAPTOR rows, so no contrast with it.
    quality = next(line for line in lines if line.startswith("| quality | all | dtcrs (lm) − dense |"))
    assert "| 0.333 [" in quality and "| accuracy |" in quality and "| 1/0 | 3 |" in quality
    assert not any(line.startswith("| quality | all | dtcrs (lm) − raptor") for line in lines)
    assert "| seed 002 answers: dtcrs (lm) > dense on answer F1 (qasper) |" in text
    # Whether the summaries reached the reader: 3 pools with a summary, ranked 3rd; one context held it (20 of the
    # 6 questions' summary tokens: 3.3 on average); the other 5 contexts are the dense ones word for word.
    assert "| qasper | dtcrs (lm) | 6 | 3 | 3 | 2 | 1 | 3.3 | 5 |" in section
    # On the extractive questions DTCRS's context is the dense one: no score differs, and no MDE is claimed.
    alike = next(line for line in lines if line.startswith("| qasper | extractive | dtcrs (lm) − dense"))
    assert "| 0/0 | 3 | 0.000 | – | not reproduced (no question's score differed" in alike
    assert (tmp_path / "r" / "trees_answers.png").stat().st_size > 0


def test_a_study_that_read_nothing_says_so_and_gives_the_command(tmp_path):
    frame = _frame("raptor", "qasper", [0.1] * 6, QIDS).drop(columns=["qasper_f1"])
    studies = tmp_path / "studies"
    write_sweep(studies / TREES.directory, [frame])
    text = render(Settings(studies, tmp_path / "r.md", 300))
    section = text[text.index("## Seed 002: answers from DTCRS") :]
    assert "**No answers yet.**" in section and TREES.command in section


def test_a_document_written_before_the_answer_section_gets_it_after_the_trees_section(tmp_path):
    studies = tmp_path / "studies"
    write_sweep(studies / TREES.directory, [_frame(tree, "qasper", values, QIDS) for tree, values in F1.items()])
    settings = Settings(studies, tmp_path / "r.md", 300)
    full = render(settings)
    heading = "## Seed 002: answers from DTCRS"
    older = full[: full.index(heading)].rstrip() + "\n"  # the answers section is the document's last
    older = "\n".join(line for line in older.splitlines() if not line.startswith("| seed 002 answers:")) + "\n"
    assert heading not in older
    rebuilt = rebuild_sections(older, ["trees", "trees_answers"], settings)
    assert rebuilt.index("## Seed 002: RAPTOR vs the query-driven tree") < rebuilt.index(heading)
    assert "| seed 002 answers: dtcrs (lm) > dense on answer F1 (qasper) |" in rebuilt
    assert rebuilt.count(heading) == 1


def test_runs_that_read_the_hugging_face_export_say_it_is_not_the_official_train_file(tmp_path):
    """The recorded sha256 of the file read decides: the 10-paper export is named as what it is; a run of the
    official file (another digest) gets no such sentence."""
    for digest, named in ((QASPER_HF_EXPORT_SHA256, True), ("0" * 64, False)):
        studies = tmp_path / digest[:4] / "studies"
        root = write_sweep(
            studies / TREES.directory, [_frame(tree, "qasper", values, QIDS) for tree, values in F1.items()]
        )
        for job in root.iterdir():
            read = {"key": "path", "path": FILES["qasper"], "sha256": digest, "bytes": 451659}
            summary = {"n_questions": 6, "data": {"name": "qasper", "files": [read], "records": 6, "seed": 42}}
            (job / "summary.json").write_text(json.dumps(summary))
        text = render(Settings(studies, tmp_path / digest[:4] / "r.md", 300))
        sentence = "is not the official `qasper-train-v0.3.json` but the same 10 train papers exported"
        assert (sentence in text) is named
