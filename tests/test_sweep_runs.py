"""Real sweeps: a failed job makes the sweep exit non-zero after the others ran, and the report works on
every sweep kind (selection-only, reader, summary-tree and mixed)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from harness.report.cli import main as report
from tests.conftest import REPO
from tests.helpers.built_once import built_once
from tests.helpers.frozen_code import freeze, run

DEMO = REPO / "harness" / "data" / "demo" / "demo_multihop.json"
FAST = ["--resamples", "200", "--study-resamples", "199", "--quiet", "--no-plots"]


@pytest.mark.slow
def test_sweep_with_a_failed_job_exits_non_zero_and_lists_it(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('[{"_id": "x", "question": ')  # truncated JSON
    sweep = tmp_path / "sweep"
    # The bad job comes first: the good one must still run after it.
    rc, out = run(
        freeze(tmp_path / "code"),
        [
            "-m",
            "read=false",
            "logger=none",
            "dataset.sample_size=3",
            f"dataset.path={bad},{DEMO}",
            f"hydra.sweep.dir={sweep}",
        ],
        tmp_path / "cache",
    )
    assert rc == 1, out[-3000:]
    assert (sweep / "0" / "error.txt").exists() and not (sweep / "0" / "summary.json").exists()
    assert (sweep / "1" / "summary.json").exists() and not (sweep / "1" / "error.txt").exists()
    assert "1 sweep job(s) failed:" in out
    listed = [line for line in out.splitlines() if line.strip().startswith("job ")]
    assert len(listed) == 1, out[-3000:]
    assert listed[0].strip().startswith("job 0: ") and f"dataset.path={bad} " in listed[0]
    assert listed[0].endswith(str(sweep / "0" / "error.txt"))


@pytest.fixture(scope="module")
def selection_sweep(tmp_path_factory) -> Path:
    """Real read=false rows: two diversifiers on four demo questions (run once for both test workers)."""

    def build(root: Path) -> None:
        overrides = ["-m", "read=false", "logger=none", "dataset.sample_size=4", "diversifier=knn,mmr"]
        rc, out = run(freeze(root / "code"), [*overrides, f"hydra.sweep.dir={root / 'sweep'}"], root / "cache")
        assert rc == 0, out[-3000:]

    return built_once(tmp_path_factory, "selection-sweep", build) / "sweep"


def job_rows(sweep) -> list[pd.DataFrame]:
    return [pd.read_parquet(p) for p in sorted(sweep.glob("*/rows.parquet"))]


def write_jobs(root, frames: list[pd.DataFrame]):
    for i, frame in enumerate(frames):
        (root / str(i)).mkdir(parents=True)
        frame.to_parquet(root / str(i) / "rows.parquet", index=False)
        (root / str(i) / "summary.json").write_text(json.dumps({"n_questions": len(frame)}))
    return root


def as_read(frame: pd.DataFrame, reader: str, shift: float) -> pd.DataFrame:
    """The same real rows as if a reader had answered: em/f1 filled, the reader named in every column."""
    frame = frame.copy()
    rng = np.random.default_rng(len(reader))
    frame["f1"] = np.clip(rng.uniform(0, 0.6, len(frame)) + shift, 0, 1)
    frame["em"] = (frame["f1"] > 0.5).astype(float)
    frame["answer"] = "an answer"
    frame["reader"] = reader
    if "cfg.reader.name" in frame:
        frame["cfg.reader.name"] = reader
    frame["cfg.read"] = True
    return frame


def report_ok(tmp_path, *dirs, extra=()) -> str:
    out = tmp_path / "report"
    assert report([*map(str, dirs), "--out", str(out), *FAST, *extra]) == 0
    return (out / "report.md").read_text()


@pytest.mark.slow
def test_report_on_selection_only_sweep(selection_sweep, tmp_path):
    frames = job_rows(selection_sweep)
    assert len(frames) == 2 and all(f["f1"].isna().all() for f in frames)
    markdown = report_ok(tmp_path, selection_sweep)
    assert "Metric: s_recall" in markdown
    # An explicit metric is kept as given.
    assert "Metric: recall_at_k" in report_ok(tmp_path / "explicit", selection_sweep, extra=["--metric", "recall_at_k"])


@pytest.mark.slow
def test_report_on_reader_sweep(selection_sweep, tmp_path):
    base = job_rows(selection_sweep)[0]
    sweep = write_jobs(tmp_path / "readers", [as_read(base, "tiny", 0.0), as_read(base, "big", 0.2)])
    markdown = report_ok(tmp_path, sweep)
    assert "Metric: f1" in markdown and "big" in markdown and "tiny" in markdown


@pytest.mark.slow
def test_report_on_tree_sweep(selection_sweep, tmp_path):
    base = as_read(job_rows(selection_sweep)[0], "tiny", 0.1)
    frames = []
    for tree, nodes in (("none", None), ("raptor", [4, 2, 1]), ("dtcrs", [4, 1])):
        frame = base.copy()
        frame["tree"] = tree
        frame["cfg.tree.name"] = tree
        if nodes is not None:
            frame["tree.nodes_per_layer"] = json.dumps(nodes)
            frame["tree.summary_nodes"] = sum(nodes[1:])
            frame["tree.build_seconds"] = 1.5
            frame["tree.cached"] = False
            frame["tree.question_class"] = "abstractive"
        frames.append(frame)
    markdown = report_ok(tmp_path, write_jobs(tmp_path / "trees", frames))
    assert "raptor" in markdown and "dtcrs" in markdown
    assert "Summary trees: nodes and build time" in markdown  # the tree.* columns were read


@pytest.mark.slow
def test_report_on_mixed_sweeps(selection_sweep, tmp_path):
    base = job_rows(selection_sweep)[0]
    reader_sweep = write_jobs(tmp_path / "readers", [as_read(base, "tiny", 0.0), as_read(base, "big", 0.2)])
    markdown = report_ok(tmp_path, selection_sweep, reader_sweep)
    assert "Metric: f1" in markdown  # the answered rows carry F1; selection-only rows join the other tables
