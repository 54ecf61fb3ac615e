"""Report tables that read right: the decomposition's share is a share of transitions, the question-type table
counts questions per budget, and a run summary leaves out metrics it did not compute."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from harness.report.common import Options
from harness.report.contrasts import contrast_tables
from harness.report.load import annotate, normalise_rows
from harness.report.trees import score_by_question_type_table
from harness.runlog import outputs
from tests.helpers.report_rows import common_columns


def policy_rows(packer: str, f1: list[float], aic: list[float], budget: int = 160, seed: int = 1) -> pd.DataFrame:
    qids = [f"q{i}" for i in range(len(f1))]
    return pd.DataFrame(
        {**common_columns(qids, seed, budget, "tiny", packer=packer), "f1": f1, "answer_in_context": aic}
    )


def test_the_decomposition_gives_the_entering_share_of_the_transitions(capsys):
    # Answer-in-context baseline -> policy: q0 0->1, q1 1->0, q2 0->1, q3 1->1. F1 changes +0.5, -0.5, +0.01, 0:
    # a net change of 0.0025, which the entered part (+0.1275) over the total would make 51.
    base = policy_rows("packed", [0.0, 0.5, 0.2, 0.4], [0, 1, 0, 1])
    policy = policy_rows("submod", [0.5, 0.0, 0.21, 0.4], [1, 0, 1, 1])
    rows, layout = annotate(normalise_rows(pd.concat([base, policy], ignore_index=True)))
    tables, _ = contrast_tables(rows, layout, Options(n_resamples=200))
    decomposition = next(t for t in tables if t.name == "contrast_decomposition")
    shown = decomposition.display.iloc[0]
    assert "share entering" not in decomposition.display.columns
    assert shown["entering share of transitions"] == "0.667"  # 2 entries of 3 transitions
    assert shown["pairs 0→1 / 1→0 / all"] == "2 / 1 / 4"
    assert decomposition.data["mean_diff"].iloc[0] == pytest.approx(0.0025)
    # Without transitions there is no share.
    same = policy_rows("submod", [0.1, 0.6, 0.3, 0.5], [0, 1, 0, 1])
    rows, layout = annotate(normalise_rows(pd.concat([base, same], ignore_index=True)))
    tables, _ = contrast_tables(rows, layout, Options(n_resamples=200))
    data = next(t for t in tables if t.name == "contrast_decomposition").data
    assert math.isnan(data["entered_share"].iloc[0])


def test_question_types_are_counted_in_questions_per_budget():
    # 3 questions (2 bridge, 1 comparison) at two budgets, each read under two seeds: 12 rows per policy, but a
    # budget's bridge row is 2 questions.
    frames = []
    for packer in ("packed", "submod"):
        for budget in (96, 160):
            for seed in (1, 2):
                frame = policy_rows(packer, [0.2, 0.4, 1.0], [0, 1, 1], budget, seed)
                frames.append(frame.assign(qtype=["bridge", "bridge", "comparison"]))
    rows, layout = annotate(normalise_rows(pd.concat(frames, ignore_index=True)))
    table = score_by_question_type_table(rows, layout, Options(n_resamples=200))
    assert table is not None
    shown = table.display.set_index(["budget", "question_type"])
    assert shown.loc[("96", "bridge"), "n"] == 2 and shown.loc[("160", "bridge"), "n"] == 2
    assert shown.loc[("160", "comparison"), "n"] == 1
    assert shown.loc[("96", "bridge"), "packer=packed"] == "0.300"  # (0.2 + 0.4) / 2
    data = table.data.set_index(["budget", "policy", "question_type"])
    assert data.loc[(96, "packer=packed", "bridge"), "n_rows"] == 4  # two questions, two seeds
    assert "n = distinct questions of the type at each budget" in table.note


def test_a_run_summary_leaves_out_metrics_it_did_not_compute(capsys):
    rows = pd.DataFrame(
        {"f1": [np.nan] * 4, "em": [np.nan] * 4, "answer_in_context": [1.0, 0.0, 1.0, 1.0], "context_tokens": 150.0}
    )
    summary = outputs.summarize(rows, n_resamples=50)
    assert "f1" not in set(summary["metric"]) and "em" not in set(summary["metric"])
    assert summary.set_index("metric").loc["answer_in_context", "mean"] == pytest.approx(0.75)
    # A summary.json written before, with its NaN rows, prints without them.
    payload = {
        "run": {"packer": "packed"},
        "n_questions": 4,
        "metrics": {
            "f1": {"mean": math.nan, "ci_low": math.nan, "ci_high": math.nan, "n": 0},
            "answer_in_context": {"mean": 0.75, "ci_low": 0.25, "ci_high": 1.0, "n": 4},
        },
    }
    outputs.print_summary_payload(payload)
    printed = capsys.readouterr().out
    assert "answer_in_context" in printed and "f1" not in printed and "nan" not in printed
