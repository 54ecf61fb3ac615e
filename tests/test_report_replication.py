"""The replication document: verdicts from intervals, pooled paired contrasts, and a render over fake studies."""

from __future__ import annotations

import pandas as pd
import pytest

from harness.report.load import normalise_rows
from harness.report.replication import LADDER, PACKING, TREES, Settings, _contrast, main, render, verdict
from tests.helpers.report_rows import packing_rows, write_sweep


@pytest.mark.parametrize(
    ("low", "high", "direction", "expected"),
    [
        (0.01, 0.10, 1, "reproduced"),
        (-0.10, -0.01, 1, "reversed"),
        (-0.10, 0.10, 1, "not reproduced (the interval includes zero)"),
        (-0.10, -0.01, -1, "reproduced"),  # the paper says "less": an interval below zero reproduces it
        (0.01, 0.10, -1, "reversed"),
        (float("nan"), 0.1, 1, "not testable (no interval)"),
    ],
)
def test_verdict_reads_the_interval_against_the_papers_direction(low, high, direction, expected):
    assert verdict(low, high, direction) == expected


def test_contrast_pools_question_seed_pairs_and_reports_the_per_question_mean(tmp_path):
    # q1 is drawn by two seeds and won both times; q2 by one seed and tied.
    rows = normalise_rows(
        pd.DataFrame(
            {
                "question_id": ["q1", "q1", "q2"] * 2,
                "seed": [1, 2, 1] * 2,
                "packer": ["submod"] * 3 + ["packed"] * 3,
                "aic": [1.0, 1.0, 0.0, 0.0, 0.0, 0.0],
            }
        )
    )
    result = _contrast(rows, "packer", "submod", "packed", "aic", Settings(tmp_path, tmp_path / "r.md", 200))
    assert result["mean_diff"] == pytest.approx(2 / 3)  # pooled like the tables' means
    assert result["unique_diff"] == pytest.approx(0.5)  # each question once
    assert (result["won"], result["lost"], result["n"]) == (2, 0, 3)
    assert result["ci_low"] <= result["mean_diff"] <= result["ci_high"]


def test_render_gives_the_packing_verdict_and_lists_studies_not_run(tmp_path):
    studies = tmp_path / "studies"
    frames = [
        packing_rows(20, packer, budget, seed, "tiny-135m")
        for packer in ("packed", "submod")
        for budget in (96, 160)
        for seed in (42, 13)
    ]
    write_sweep(studies / PACKING.directory, frames)
    out = tmp_path / "docs" / "replication.md"
    assert main(["--studies", str(studies), "--out", str(out), "--resamples", "300"]) == 0
    text = out.read_text()

    rows = pd.concat(frames)
    at_160 = rows[rows["budget"] == 160].pivot_table(
        index=["question_id", "seed"], columns="packer", values="gold_doc_coverage"
    )
    expected = (at_160["submod"] - at_160["packed"]).mean()
    verdict_line = next(line for line in text.splitlines() if line.startswith("**Verdict (B = 160)"))
    assert f"submod − naive {expected:.3f} [" in verdict_line.split("gold coverage")[1]
    summary_row = next(line for line in text.splitlines() if line.startswith("| seed 000: submod > naive on gold cov"))
    assert f"| {expected:.3f} [" in summary_row  # the verdict table repeats the section's figure
    assert "**Not run yet.**" in text and LADDER.command in text
    assert (out.parent / "replication" / "packing_budget.png").stat().st_size > 0
    # The same inputs give the same document.
    assert render(Settings(studies, out, 300)) == text


def test_trees_section_totals_fresh_builds_only(tmp_path):
    """RAPTOR builds per document (the second question on a document reads the cached tree), DTCRS per
    question: totals over fresh builds, worked out by hand."""

    def rows(tree, builds):
        return pd.DataFrame(
            {
                "question_id": ["q1", "q2", "q3"],
                "dataset": "qasper",
                "tree": tree,
                "seed": 42,
                "tree.build_seconds": [b[0] for b in builds],
                "tree.summary_nodes": [b[1] for b in builds],
                "tree.lm_calls": [b[1] for b in builds],
                "tree.lm_prompt_tokens": [b[1] * 100 for b in builds],
                "tree.cached": [b[2] for b in builds],
            }
        )

    studies = tmp_path / "studies"
    raptor = rows("raptor", [(100.0, 10, False), (100.0, 10, True), (100.0, 10, False)])
    dtcrs = rows("dtcrs", [(20.0, 2, False), (5.0, 0, False), (5.0, 0, False)])
    write_sweep(studies / TREES.directory, [raptor, dtcrs])
    text = render(Settings(studies, tmp_path / "r.md", 300))
    # build time 30 s vs 200 s: -85%; summary nodes 2 vs 20: -90%
    assert "| seed 002: DTCRS below RAPTOR on build time (qasper) |" in text
    line = next(x for x in text.splitlines() if x.startswith("| seed 002: DTCRS below RAPTOR on build time"))
    assert "-85% [" in line
    assert "- qasper: summary nodes -90% [" in text
    assert (tmp_path / "r" / "trees.png").stat().st_size > 0
    assert "| qasper | dtcrs | 3 | 3 | 1 | 2 | 30.0 | 20.0 | 2 | 200 |" in text
    table = text[text.index("| dataset | tree |") :]
    assert "| qasper | raptor | 3 | 2 | 2 | 20 | 200.0 | 100.0 | 20 | 2000 |" in table
