"""What the W&B runs write offline, read back from the run files: the per-question table of a job's run
(context as HTML, provenance columns) and the report run of a sweep (job_type report, its tables, plots and
the viewer artifact).

wandb 0.31 has no Python reader of its ``run-*.wandb`` transaction log (the Go core writes it): ``records``
reads the log format it documents (LevelDB's log: 32 KiB blocks of CRC-32-checked chunks after a 7-byte
``:W&B`` header) into ``wandb_internal_pb2.Record`` messages.
"""

from __future__ import annotations

import json
import logging
import os
import struct
import subprocess
import sys
import time
import zlib
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest
from omegaconf import OmegaConf
from wandb.proto import wandb_internal_pb2

from harness.metrics.provenance import PROVENANCE_COLUMNS
from harness.report.tables import Options
from harness.runlog import wandb_report
from harness.runlog.wandb_logger import TABLE_COLUMNS, WandbLogger
from harness.runlog.wandb_report import WANDB_LOGGER_TARGET, WandbReport, log_report
from tests.conftest import REPO, compose_cfg
from tests.helpers.report_rows import packing_rows, write_sweep
from tests.test_pipeline import run_cli

WANDB_PAGE = REPO / "docs" / "wandb.md"

BLOCK, HEADER = 32768, 7
FULL, FIRST, MIDDLE, LAST = 1, 2, 3, 4


def records(path: Path) -> Iterator[wandb_internal_pb2.Record]:
    data = path.read_bytes()
    ident, _magic, _version = struct.unpack("<4sHB", data[:HEADER])
    assert ident == b":W&B"
    pos, pending = HEADER, b""
    while pos + HEADER <= len(data):
        left = BLOCK - pos % BLOCK
        if left < HEADER:  # a block's tail too short for a chunk header is padding
            pos += left
            continue
        crc, length, kind = struct.unpack("<IHB", data[pos : pos + HEADER])
        if kind == 0 and length == 0:
            pos += left
            continue
        chunk = data[pos + HEADER : pos + HEADER + length]
        assert zlib.crc32(chunk, zlib.crc32(bytes([kind]))) == crc, f"bad checksum at byte {pos}"
        pos += HEADER + length
        pending = chunk if kind in (FULL, FIRST) else pending + chunk
        if kind in (FULL, LAST):
            record = wandb_internal_pb2.Record()
            record.ParseFromString(pending)
            yield record


def written(path: Path, timeout_s: float = 20.0) -> list[wandb_internal_pb2.Record]:
    """The run's records once its exit record is on disk (the core process writes the log behind the run)."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            logged = list(records(path))
        except (AssertionError, struct.error):  # a chunk still being written
            logged = []
        if any(r.WhichOneof("record_type") == "exit" for r in logged) or time.monotonic() > deadline:
            return logged
        time.sleep(0.2)


class RunFiles:
    """One offline run folder read back: its run record, history keys and artifacts (manifest by path)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        logged = written(next(folder.glob("run-*.wandb")))
        self.run = next(r.run for r in logged if r.WhichOneof("record_type") == "run")
        self.history: dict[str, dict] = {}
        for r in logged:
            if r.WhichOneof("record_type") == "history":
                for item in r.history.item:
                    if len(item.nested_key) == 2:
                        self.history.setdefault(item.nested_key[0], {})[item.nested_key[1]] = json.loads(
                            item.value_json
                        )
        self.artifacts = [r.artifact for r in logged if r.WhichOneof("record_type") == "artifact"]

    def artifact(self, type_: str, name: str | None = None):
        found = [a for a in self.artifacts if a.type == type_ and (name is None or a.name == name)]
        assert len(found) == 1, [(a.type, a.name) for a in self.artifacts]
        return found[0]

    @staticmethod
    def entries(artifact) -> dict[str, Path]:
        """The artifact's files, by their path in it, as staged on this machine (offline: not yet uploaded)."""
        return {entry.path: Path(entry.local_path) for entry in artifact.manifest.contents}


def run_folders(root: Path) -> list[Path]:
    return sorted(root.glob("wandb/offline-run-*"))


@pytest.fixture(autouse=True)
def offline(tmp_path, monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    # Artifact files are staged under the data dir until a sync: keep them out of the home directory.
    monkeypatch.setenv("WANDB_DATA_DIR", str(tmp_path / "wandb-data"))


CONTEXT = "Paris is the capital of France.\n\nThe <script>x</script> tower stands in Paris."


def with_provenance(rows: pd.DataFrame) -> pd.DataFrame:
    """Rows with a context of two snippets (the first from a gold document) and its two answer spans."""
    first, second = CONTEXT.split("\n\n")
    start = CONTEXT.index(second)
    snippets = [
        {"doc": "d1", "title": "France", "cand": "d1", "sents": [0], "tok": 8, "gold": True, "sup": True,
         "ans": True, "cut": False, "kind": "document", "start": 0, "end": len(first)},
        {"doc": "d2", "title": "Tower", "cand": "d2", "sents": [0], "tok": 9, "gold": False, "sup": False,
         "ans": True, "cut": True, "kind": "document", "start": start, "end": len(CONTEXT)},
    ]  # fmt: skip
    spans = [[0, 5], [len(CONTEXT) - 6, len(CONTEXT) - 1]]
    assert [CONTEXT[a:b] for a, b in spans] == ["Paris", "Paris"]
    pool = [{"id": "d1", "title": "France", "score": 0.9, "gold": True, "ans": True, "kind": "document", "kept": True}]
    return rows.assign(
        context=CONTEXT, snippets=json.dumps(snippets), answer_spans=json.dumps(spans), pool=json.dumps(pool)
    )


def log_job(rows: pd.DataFrame, out: Path) -> RunFiles:
    cfg = OmegaConf.create({"seed": 42, "budget": 96})
    summary = {
        "run": {"packer": "packed", "budget": 96},
        "metrics": {"f1": {"mean": 0.5, "ci_low": 0.4, "ci_high": 0.6, "n": len(rows)}},
        "n_questions": len(rows),
    }
    WandbLogger(mode="offline").log_run(cfg, rows, summary, out)
    [folder] = run_folders(out)
    return RunFiles(folder)


def question_table(run: RunFiles) -> tuple[dict, dict[str, Path]]:
    assert run.history["questions"]["_type"] == "table-file"
    artifact = run.artifact("run_table")
    entries = RunFiles.entries(artifact)
    return json.loads(entries["questions.table.json"].read_text()), entries


def test_the_question_table_holds_the_marked_context_and_the_provenance_columns(tmp_path):
    rows = with_provenance(packing_rows(3, "packed", 96, 42, "tiny-135m"))
    run = log_job(rows, tmp_path / "job")
    assert run.run.job_type == "run"
    table, entries = question_table(run)
    scalar = [c for c in TABLE_COLUMNS if c in rows.columns]
    assert table["columns"] == [*scalar, "context", *PROVENANCE_COLUMNS]
    assert len(table["data"]) == 3
    i = table["columns"].index
    for cell, (_, row) in zip(table["data"], rows.iterrows(), strict=True):
        context = cell[i("context")]
        assert context["_type"] == "html-file"  # a wandb.Html media entry, its file in the table's artifact
        fragment = entries[context["path"]].read_text()
        assert fragment.count('<mark class="answer"') == 2
        assert "<script>" not in fragment and "&lt;script&gt;" in fragment
        assert 'class="snippet kind-document gold supporting"' in fragment and "cut by budget" in fragment
        assert "normalize.css" not in fragment  # not injected: the fragment styles itself
        for column in PROVENANCE_COLUMNS:
            assert cell[i(column)] == row[column]
    types = table["column_types"]["params"]["type_map"]
    assert {"wb_type": "html-file"} in types["context"]["params"]["allowed_types"]


def test_rows_from_before_provenance_log_their_plain_context(tmp_path):
    rows = packing_rows(2, "packed", 96, 42, "tiny-135m").assign(context="a <b> context")
    table, entries = question_table(log_job(rows, tmp_path / "job"))
    assert table["columns"][-1] == "context" and not set(PROVENANCE_COLUMNS) & set(table["columns"])
    fragment = entries[table["data"][0][-1]["path"]].read_text()
    assert 'class="context plain"' in fragment and "a &lt;b&gt; context" in fragment


def test_a_disabled_logger_records_nothing_and_never_loads_wandb(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "wandb", None)  # any `import wandb` now raises ImportError
    rows = packing_rows(2, "packed", 96, 42, "tiny-135m")
    WandbLogger(mode="disabled").log_run(compose_cfg([]), rows, {"metrics": {}, "n_questions": 2}, tmp_path)
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(ImportError):
        WandbLogger(mode="offline").log_run(compose_cfg([]), rows, {"metrics": {}, "n_questions": 2}, tmp_path)


def synthetic_sweep(root: Path) -> Path:
    frames = [
        with_provenance(packing_rows(12, packer, budget, 42, "tiny-135m"))
        for packer in ("packed", "submod")
        for budget in (64, 128)
    ]
    return write_sweep(root / "sweep", frames)


def check_report_run(sweep: Path, group: str) -> RunFiles:
    [folder] = run_folders(sweep)
    run = RunFiles(folder)
    assert run.run.job_type == "report" and run.run.run_group == group
    report = sweep / "report"
    csvs, pngs = sorted(report.glob("*.csv")), sorted(report.glob("*.png"))
    assert {"runs", "policy_table"} <= {p.stem for p in csvs} and pngs
    for path in csvs:
        logged = run.history[f"report/{path.stem}"]
        assert logged["_type"] == "table-file"
        assert logged["ncols"] == len(pd.read_csv(path).columns)
    for path in pngs:
        assert run.history[f"plots/{path.stem}"]["_type"] == "image-file"
    viewer = run.artifact("viewer")
    assert viewer.name.startswith("viewer-")
    staged = RunFiles.entries(viewer)
    assert list(staged) == ["viewer.html"]
    assert staged["viewer.html"].read_bytes() == (report / "viewer.html").read_bytes()
    assert 'id="payload"' in staged["viewer.html"].read_text()
    assert "](viewer.html)" in (report / "report.md").read_text()  # the report links its viewer
    files = RunFiles.entries(run.artifact("report"))
    assert {"report.md", *(p.name for p in csvs + pngs)} <= set(files)
    return run


def test_a_sweep_report_run_logs_the_tables_plots_and_viewer(tmp_path):
    sweep = synthetic_sweep(tmp_path)
    out = log_report(sweep, mode="offline", options=Options(n_resamples=200))
    assert out == sweep / "report"
    check_report_run(sweep, group=str(sweep))


def test_the_callback_logs_the_report_only_for_a_wandb_logger(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(wandb_report, "log_report", lambda *args, **kwargs: calls.append((args, kwargs)))
    sweep = tmp_path / "sweep"
    for logger in ({}, {"_target_": WANDB_LOGGER_TARGET, "mode": "disabled"}):
        WandbReport().on_multirun_end(OmegaConf.create({"hydra": {"sweep": {"dir": str(sweep)}}, "logger": logger}))
    assert calls == []
    config = {"_target_": WANDB_LOGGER_TARGET, "mode": "offline", "project": "p", "tags": ["t"], "group": None}
    WandbReport(resamples=50).on_multirun_end(
        OmegaConf.create({"hydra": {"sweep": {"dir": str(sweep)}}, "logger": config})
    )
    [(args, kwargs)] = calls
    assert args == (sweep,) and kwargs["project"] == "p" and kwargs["tags"] == ["t"]
    assert kwargs["options"].n_resamples == 50


def test_the_callback_never_fails_the_sweep(tmp_path, monkeypatch, caplog):
    logger = {"_target_": WANDB_LOGGER_TARGET, "mode": "offline"}
    empty = tmp_path / "empty"
    empty.mkdir()
    config = OmegaConf.create({"hydra": {"sweep": {"dir": str(empty)}}, "logger": logger})
    with caplog.at_level(logging.WARNING, logger="harness.runlog.wandb_report"):
        WandbReport().on_multirun_end(config)  # no rows at all: every job failed
    assert "no W&B report run" in caplog.text and f"wandb_report {empty}" in caplog.text

    def broken(*args, **kwargs):
        raise RuntimeError("boom")

    monkeypatch.setattr(wandb_report, "build_report_dir", broken)
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="harness.runlog.wandb_report"):
        WandbReport().on_multirun_end(config)
    assert "report run of" in caplog.text and "boom" in caplog.text
    import wandb

    assert wandb.run is None


def test_the_report_callback_comes_with_the_wandb_logger_only():
    callbacks = compose_cfg([], return_hydra_config=True).hydra.callbacks
    assert callbacks.wandb_report._target_ == "harness.runlog.wandb_report.WandbReport"
    assert "failed_jobs" in callbacks
    assert "wandb_report" not in compose_cfg(["logger=none"], return_hydra_config=True).hydra.callbacks
    assert "wandb_report" not in compose_cfg(["+sweeps=smoke"], return_hydra_config=True).hydra.callbacks


def test_the_command_logs_an_existing_sweep(tmp_path, capsys):
    sweep = synthetic_sweep(tmp_path)
    assert wandb_report.main([str(sweep), "--resamples", "100", "--group", "g1"]) == 0
    check_report_run(sweep, group="g1")
    assert wandb_report.main([str(tmp_path / "missing")]) == 2


@pytest.mark.slow
def test_a_wandb_sweep_ends_with_its_report_run(tmp_path):
    """A real sweep (selection only, no reader): two job runs and one report run in the sweep's group."""
    sweep = tmp_path / "sweep"
    result = run_cli(
        [
            "-m",
            "budget=64,96",
            "read=false",
            "logger=wandb",
            "hydra.callbacks.wandb_report.resamples=200",
            f"hydra.sweep.dir={sweep}",
        ],
        cache_dir=tmp_path / "cache",
        env_extra={"WANDB_DATA_DIR": str(tmp_path / "wandb-data")},
    )
    assert result.returncode == 0, result.stderr[-3000:]
    check_report_run(sweep, group=str(sweep))
    # docs/wandb.md's check before a sync, on this sweep: every job run and the report run, nothing uploaded.
    [dry_run] = [line for line in WANDB_PAGE.read_text().splitlines() if line.startswith("wandb sync --dry-run ")]
    listed = subprocess.run(
        ["bash", "-c", dry_run.replace("outputs/first-study-wandb", str(sweep))],
        env={k: v for k, v in os.environ.items() if k != "WANDB_API_KEY"}
        | {"HOME": str(tmp_path), "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"},
        cwd=tmp_path, capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    assert "Would sync 3 run(s)" in listed.stdout + listed.stderr
    for job in ("0", "1"):
        [folder] = run_folders(sweep / job)
        run = RunFiles(folder)
        assert run.run.job_type == "sweep-job" and run.run.run_group == str(sweep)
        table, _ = question_table(run)
        assert {"context", *PROVENANCE_COLUMNS} <= set(table["columns"])
