"""A sweep killed with SIGKILL mid-run and launched again yields exactly the rows of an uninterrupted sweep."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from tests.conftest import REPO, TINY_READER
from tests.helpers.cores import every_core

# Four jobs one after another in one process (the basic launcher), one row journaled at a time. Answers of eight
# tokens at most: the kill must land mid-read, not the read last long. One torch thread: the two sweeps share the
# cores (threads sized to all of them would contend). Each process is most of the test's time
# (imports, encoder, reader), so the sweep runs in one rather than in a parallel launcher's two workers.
SWEEP = [
    "-m", "+sweeps=smoke", TINY_READER, "reader.batch_size=1", "reader.max_new_tokens=8", "reader.torch_threads=1",
    "read_chunk=1",
]  # fmt: skip


def launch(sweep_dir: Path, cache_dir: Path) -> subprocess.Popen:
    """The sweep in the background, on every core: the test's two sweeps run side by side."""
    env = {**os.environ, "HARNESS_CACHE_DIR": str(cache_dir), "WANDB_MODE": "disabled"}
    with every_core():
        return subprocess.Popen(
            [sys.executable, "-m", "harness", *SWEEP, f"hydra.sweep.dir={sweep_dir}"],
            cwd=REPO,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )


def journaled_rows(sweep_dir: Path) -> int:
    return sum(len(p.read_text().splitlines()) for p in sweep_dir.glob("*/rows.journal.jsonl"))


def sweep_rows(sweep_dir: Path) -> dict[str, pd.DataFrame]:
    tables = {}
    for job in sorted(p for p in sweep_dir.iterdir() if p.is_dir() and p.name.isdigit()):
        rows = pd.read_parquet(job / "rows.parquet")
        # The two sweeps use different cache folders on purpose; that path is the only allowed difference.
        tables[job.name] = rows.drop(
            columns=[c for c in rows.columns if c.startswith("cfg.paths.") or c.endswith("cache_dir")]
        )
    return tables


@pytest.mark.slow
def test_killed_sweep_resumes_to_identical_rows(tmp_path):
    # The uninterrupted sweep runs beside the killed one (its own folder and cache): nothing they share.
    clean_dir = tmp_path / "clean"
    clean = launch(clean_dir, tmp_path / "cache_clean")
    killed_dir = tmp_path / "killed"
    proc = launch(killed_dir, tmp_path / "cache_killed")
    try:
        deadline = time.time() + 600
        while journaled_rows(killed_dir) < 2:  # some rows written, the sweep far from done (12 rows in all)
            assert proc.poll() is None, proc.stdout.read()[-3000:]
            assert time.time() < deadline, "sweep produced no rows in time"
            time.sleep(0.2)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        assert not all((killed_dir / str(j) / "summary.json").exists() for j in range(4)), "killed too late"

        resumed = launch(killed_dir, tmp_path / "cache_killed")
        out, _ = resumed.communicate(timeout=900)
        assert resumed.returncode == 0, out[-3000:]

        out, _ = clean.communicate(timeout=900)
        assert clean.returncode == 0, out[-3000:]
    finally:
        if clean.poll() is None:  # a failed check above leaves no sweep running
            os.killpg(clean.pid, signal.SIGKILL)

    killed, uninterrupted = sweep_rows(killed_dir), sweep_rows(clean_dir)
    assert sorted(killed) == sorted(uninterrupted) == ["0", "1", "2", "3"]
    for job in killed:
        assert len(killed[job]) == 3 and killed[job]["question_id"].is_unique
        pd.testing.assert_frame_equal(killed[job], uninterrupted[job])
