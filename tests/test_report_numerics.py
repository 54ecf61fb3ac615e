"""Reader numerics in the report: rows of one reader computed with different numerics are told apart, said so
at the top, and never paired; rows of one numerics per reader, or from before the column, read as before."""

from __future__ import annotations

import logging

import pandas as pd
import pytest

from harness.report.cli import main
from harness.report.common import Options
from harness.report.contrasts import contrast_tables
from harness.report.load import annotate, load_runs, normalise_rows
from harness.report.numerics import numerics_note, numerics_splits, split_reader_numerics
from harness.report.plots import reader_scale
from harness.report.replication.common import READER_IRCOT, Settings
from harness.report.replication.document import render
from tests.helpers.report_rows import packing_rows, write_sweep

READER = "qwen2.5-coder-0.5b"
BF16 = "transformers/hf/bfloat16/cpu-amx"
GGUF = "llama_cpp/gguf-Q4_K_M/gguf/cpu-amx"
FAST = ["--resamples", "200", "--study-resamples", "199", "--no-plots", "--no-viewer"]


def numerics_rows(packer: str, numerics: str | None, n_questions: int = 12, shift: float = 0.0) -> pd.DataFrame:
    """One job's rows of ``READER`` at B = 128, seed 42: submod's F1 is packed's + 0.1, then + ``shift``."""
    frame = packing_rows(n_questions, packer, 128, 42, READER)
    if packer == "submod":
        frame["f1"] = frame["f1"] + shift
    if numerics is not None:
        frame["reader_numerics"] = numerics
    return frame


def sweep(root, numerics: list[str | None], shifts: dict[str | None, float] | None = None):
    shifts = shifts or {}
    frames = [numerics_rows(p, n, shift=shifts.get(n, 0.0)) for n in numerics for p in ("packed", "submod")]
    return write_sweep(root, frames)


def test_a_reader_with_two_numerics_is_split_and_the_report_says_so_first(tmp_path, capsys, caplog):
    root = sweep(tmp_path / "sweep", [BF16, GGUF])
    with caplog.at_level(logging.WARNING):
        assert main([str(root), *FAST]) == 0
    printed = capsys.readouterr().out
    note = next(line for line in printed.splitlines() if line.strip())  # the first thing printed
    assert note.startswith("Reader numerics differ:")
    assert f"{READER} as {GGUF} (24 rows), {BF16} (24 rows)" in note
    assert any(m.startswith("Reader numerics differ:") for m in caplog.messages)

    report = (root / "report" / "report.md").read_text()
    preamble = report[: report.index("Inputs:")]
    assert "Reader numerics differ:" in preamble and f"{BF16} (24 rows)" in preamble
    policies = set(pd.read_csv(root / "report" / "policy_table.csv")["policy"])
    assert policies == {f"packer={p}, reader={READER} [{n}]" for p in ("packed", "submod") for n in (BF16, GGUF)}


def test_contrasts_pair_only_rows_of_one_numerics(tmp_path):
    # Under bf16 submod gains 0.1 on every question, under the GGUF weights it loses 0.2 (0.1 - 0.3): a pair
    # across numerics would give neither.
    root = sweep(tmp_path / "sweep", [BF16, GGUF], shifts={GGUF: -0.3})
    rows, layout = annotate(load_runs([root])[0])
    assert "reader" in layout.policy
    (table, *_), data = contrast_tables(rows, layout, Options(n_resamples=200))
    assert data is not None and len(data) == 2
    for record in data.itertuples():
        numerics = BF16 if BF16 in record.policy else GGUF
        assert record.policy == f"packer=submod, reader={READER} [{numerics}]"
        assert record.baseline == f"packer=packed, reader={READER} [{numerics}]"
        assert record.mean_diff == pytest.approx(0.1 if numerics == BF16 else -0.2)
        assert record.n == 12


def test_replication_contrasts_pair_within_a_reader_and_the_document_says_so(tmp_path):
    studies = tmp_path / "studies"
    sweep(studies / READER_IRCOT.directory, [BF16, GGUF], shifts={GGUF: -0.3})
    settings = Settings(studies, tmp_path / "r.md", 200)
    rows = settings.load(READER_IRCOT)
    assert rows is not None
    result = settings.contrast(rows, "packer", "submod", "packed", "f1")
    # 12 pairs under each numerics, each of them paired with its own: 0.1 and -0.2, never a cross pair.
    assert result["n"] == 24 and result["mean_diff"] == pytest.approx(-0.05)
    text = render(settings)
    head = text[: text.index("## ")]
    assert f"{READER} as {GGUF} (24 rows), {BF16} (24 rows)" in head


def test_one_numerics_per_reader_leaves_the_report_as_it_was(tmp_path, capsys):
    with_column = sweep(tmp_path / "new", [BF16])
    without = sweep(tmp_path / "old", [None])
    assert main([str(with_column), *FAST]) == 0
    assert "Reader numerics" not in capsys.readouterr().out
    assert main([str(without), *FAST]) == 0
    assert "Reader numerics" not in (with_column / "report" / "report.md").read_text()
    for name in ("policy_table.csv", "contrasts.csv"):
        assert pd.read_csv(with_column / "report" / name).equals(pd.read_csv(without / "report" / name))

    rows, layout = annotate(load_runs([with_column])[0])
    assert set(rows["reader"]) == {READER} and "reader" not in layout.policy
    assert set(rows["policy"]) == {"packer=packed", "packer=submod"}
    assert numerics_splits(rows) == []


def test_rows_without_the_column_load_as_one_unknown_numerics(tmp_path):
    rows, _ = load_runs([sweep(tmp_path / "old", [None])])
    assert "reader_numerics" not in rows.columns and set(rows["reader"]) == {READER}
    # Beside rows that say their numerics, the old ones are a numerics of their own: unknown.
    rows, _ = load_runs([sweep(tmp_path / "mixed", [None, GGUF])])
    assert set(rows["reader"]) == {f"{READER} [unknown]", f"{READER} [{GGUF}]"}
    assert numerics_note(numerics_splits(rows)) == (
        f"Reader numerics differ: {READER} as {GGUF} (24 rows), unknown (24 rows). Each numerics is reported "
        "as a reader of its own (`READER [NUMERICS]`) and contrasts never pair rows across them."
    )


def test_the_split_touches_only_the_reader_with_several_numerics_and_is_idempotent():
    frame = pd.DataFrame(
        {
            "question_id": ["q1", "q2", "q1", "q2", "q1"],
            "reader": ["a", "a", "a", "a", "b"],
            "reader_numerics": [BF16, BF16, GGUF, "", GGUF],
            "f1": [1.0, 0.0, 1.0, 0.5, 0.0],
        }
    )
    rows, splits = split_reader_numerics(frame)
    assert rows["reader"].tolist() == [f"a [{BF16}]", f"a [{BF16}]", f"a [{GGUF}]", "a [unknown]", "b"]
    assert [(s.reader, s.counts) for s in splits] == [("a", ((GGUF, 1), (BF16, 2), ("unknown", 1)))]
    assert frame["reader"].tolist() == ["a", "a", "a", "a", "b"]  # the given frame is left alone
    assert numerics_splits(rows) == splits
    again, more = split_reader_numerics(rows)
    assert more == [] and again["reader"].tolist() == rows["reader"].tolist()
    # Hand-made rows annotated without loading are split too.
    annotated, layout = annotate(normalise_rows(frame.drop(columns="reader_numerics").assign(reader="a")))
    assert "reader" not in layout.policy and set(annotated["reader"]) == {"a"}
    annotated, layout = annotate(frame.assign(qkey=frame["question_id"]))
    assert layout.policy == ("reader",) and f"reader=a [{GGUF}]" in set(annotated["policy"])


def test_reader_size_ignores_the_numerics_of_a_label():
    assert reader_scale(f"qwen2.5-7b [{GGUF}]") == 7e9
    assert reader_scale(f"smollm2-135m [{BF16}]") == pytest.approx(1.35e8)
