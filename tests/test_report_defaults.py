"""The report's defaults answer the question asked: a selection-only packer study is read on answer-in-context,
no report overwrites a file under version control unless told to, and a page names its runs relative to where
the command ran."""

from __future__ import annotations

import base64
import gzip
import json
import re
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd

from harness.report.cli import main as report
from harness.report.replication import build_parser as replicate_parser
from harness.report.replication import main as replicate
from harness.report.viewer import main as view
from tests.helpers.report_rows import packing_rows, write_sweep

FAST = ["--resamples", "200", "--study-resamples", "199", "--quiet", "--no-plots", "--no-viewer"]


def selection_only(frame: pd.DataFrame) -> pd.DataFrame:
    """Rows as a read=false run writes them: no answers scored, the selection metrics filled."""
    return frame.assign(f1=np.nan, em=np.nan, s_recall=frame["recall_at_k"])


def git_repository(root: Path, *tracked: str) -> None:
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    for name in tracked:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text("published\n")
    subprocess.run(["git", "add", *tracked], cwd=root, check=True)


def test_a_selection_only_packer_sweep_is_reported_on_answer_in_context(tmp_path):
    frames = [selection_only(packing_rows(20, packer, 128, 42, "tiny-135m")) for packer in ("packed", "submod")]
    sweep = write_sweep(tmp_path / "sweep", frames)
    assert report([str(sweep), *FAST]) == 0
    markdown = (sweep / "report" / "report.md").read_text()
    assert "Metric: answer_in_context" in markdown
    assert "## Paired contrasts against the baseline (answer in ctx)" in markdown
    contrasts = pd.read_csv(sweep / "report" / "contrasts.csv")
    assert np.allclose(contrasts["mean_a"], frames[1]["answer_in_context"].mean())  # submod's, not its S-Recall


def test_replicate_writes_beside_the_studies_and_refuses_a_tracked_page_without_force(tmp_path):
    assert replicate_parser().parse_args([]).out == Path("outputs/studies/replication.md")
    git_repository(tmp_path, "docs/replication.md")
    page = tmp_path / "docs" / "replication.md"
    studies = tmp_path / "studies"
    arguments = ["--studies", str(studies), "--out", str(page), "--resamples", "200"]
    assert replicate(arguments) == 2
    assert page.read_text() == "published\n"
    assert replicate([*arguments, "--force"]) == 0
    assert page.read_text().startswith("# Replication study")
    untracked = tmp_path / "docs" / "draft.md"  # beside it, but not under version control: no flag needed
    assert replicate(["--studies", str(studies), "--out", str(untracked), "--resamples", "200"]) == 0


def test_a_report_into_a_tracked_folder_needs_force(tmp_path, capsys):
    git_repository(tmp_path, "docs/report/report.md")
    sweep = write_sweep(tmp_path / "sweep", [packing_rows(10, p, 128, 42, "tiny-135m") for p in ("packed", "submod")])
    out = tmp_path / "docs" / "report"
    assert report([str(sweep), "--out", str(out), *FAST]) == 2
    assert "--force" in capsys.readouterr().err and (out / "report.md").read_text() == "published\n"
    assert report([str(sweep), "--out", str(out), "--force", *FAST]) == 0


def test_the_viewer_names_the_sweep_relative_to_the_working_directory(tmp_path, monkeypatch):
    sweep = write_sweep(tmp_path / "outputs" / "sweep", [packing_rows(5, p, 128, 42, "tiny-135m") for p in ("packed",)])
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "viewer.html"
    assert view([str(sweep.resolve()), "--out", str(out)]) == 0
    page = out.read_text()
    assert re.search(r"<title>Evidence viewer: outputs/sweep</title>", page)
    encoded = re.search(r'id="payload"[^>]*>([^<]+)<', page)
    payload = json.loads(gzip.decompress(base64.b64decode(encoded[1]))) if encoded else {}
    assert payload.get("sources") == ["outputs/sweep"]
    assert str(tmp_path) not in page
