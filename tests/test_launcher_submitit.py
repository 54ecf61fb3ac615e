"""The SLURM path through submitit, for real on one machine: `hydra/launcher=submitit_local` runs each sweep
job under submitit's local executor, which handles a preemption as on SLURM (the job's process gets SIGUSR2,
submitit checkpoints the Hydra job and requeues it). A job preempted mid-read is requeued and resumes from its
row journal: every question exactly once, answers equal to an uninterrupted run, and only the questions without
a row or cached answer go to the reader again."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pandas as pd
import pytest

from tests.helpers.frozen_code import freeze, popen
from tests.test_read_server import ScriptedServer

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def code(tmp_path_factory) -> Path:
    return freeze(tmp_path_factory.mktemp("code"))


def job_processes(marker: str) -> list[int]:
    """Pids of submitit's job processes (``python -u -m submitit.core._submit FOLDER``) whose folder has ``marker``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"submitit.core._submit" in argv and any(marker.encode() in a for a in argv):
            found.append(int(entry.name))
    return found


def sweep_args(server, sweep: Path, launcher: str) -> list[str]:
    return [
        "-m",
        "dataset=demo",
        "reader=openai_compat",
        f"reader.base_url={server.base_url}",
        "reader.concurrency=1",  # one answer at a time, so the preemption lands mid-read
        "read_chunk=2",
        "logger=none",
        "seed=42",
        f"hydra/launcher={launcher}",
        f"hydra.sweep.dir={sweep}",
    ]


def test_a_preempted_job_is_requeued_and_resumes_from_its_journal(tmp_path, code):
    sweep = tmp_path / "preempted"
    with ScriptedServer(delay=0.5) as server:
        proc = popen(code, sweep_args(server, sweep, "submitit_local"), tmp_path / "cache")
        journal = sweep / "0" / "rows.journal.jsonl"
        deadline = time.time() + 600
        while not (journal.exists() and len(journal.read_text().splitlines()) >= 4):
            assert proc.poll() is None, proc.stdout.read()[-4000:]
            assert time.time() < deadline, "the job never journaled four rows"
            time.sleep(0.1)
        [job] = job_processes(str(sweep))
        before = len(server.requests)
        os.kill(job, signal.SIGUSR2)  # what SLURM sends ahead of a preemption or the time limit (--signal=USR2@)
        out, _ = proc.communicate(timeout=600)
    assert proc.returncode == 0, out[-4000:]
    logs = "\n".join(p.read_text() for p in (sweep / ".submitit").rglob("*.out"))
    assert "this job is preempted" in logs and "Requeued job" in logs, logs[-3000:]
    assert job not in job_processes(str(sweep)), "the preempted process is gone"

    rows = pd.read_parquet(sweep / "0" / "rows.parquet")
    assert len(rows) == 12 and rows["question_id"].is_unique, "a question was lost or read twice"
    summary = json.loads((sweep / "0" / "summary.json").read_text())
    resumed = summary["counters"]["reader_prompts_generated"]
    assert 0 < resumed <= 12 - 4  # the requeued job read only what had no row (or cached answer)
    assert len(server.requests) <= before + resumed + 1  # at most the one answer in flight was asked again

    with ScriptedServer(delay=0.0) as server:
        proc = popen(code, sweep_args(server, tmp_path / "whole", "basic"), tmp_path / "cache-whole")
        out, _ = proc.communicate(timeout=600)
    assert proc.returncode == 0, out[-4000:]
    whole = pd.read_parquet(tmp_path / "whole" / "0" / "rows.parquet")
    key = ["question_id", "answer", "raw_answer", "em", "f1"]
    pd.testing.assert_frame_equal(
        rows[key].sort_values("question_id", ignore_index=True),
        whole[key].sort_values("question_id", ignore_index=True),
    )
