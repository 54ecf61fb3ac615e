"""SIGTERM and SIGINT stop a run within seconds, mid-read included, and a relaunch resumes without loss."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pandas as pd
import pytest

from harness.core import signals
from tests.helpers.frozen_code import freeze, popen

# A chunk is one batch of two rows; answers of eight tokens at most, since the read is what the stop interrupts,
# not what is checked.
# Eight of the demo's questions: the run is read three times (stopped, resumed, clean), in bf16 where the CPU has
# it, which on a CPU without AMX computes at about float32's speed.
RUN = ["dataset=demo", "dataset.sample_size=8", "reader.batch_size=2", "reader.max_new_tokens=8", "read_chunk=2"]
RUN += ["logger=none"]


@pytest.fixture
def handlers():
    saved = {s: signal.getsignal(s) for s in signals.HANDLED}
    signals.reset()
    signals.install()
    yield
    signals.reset()
    for s, h in saved.items():
        signal.signal(s, h)


def test_signal_raises_interrupted_with_shell_exit_code(handlers):
    with pytest.raises(signals.Interrupted) as caught:
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(5)  # the handler raises long before this ends
    assert caught.value.exit_code == 143 and signals.stop_requested()


def test_sigint_gives_130(handlers):
    with pytest.raises(signals.Interrupted) as caught:
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(5)
    assert caught.value.exit_code == 130


def test_deferred_block_finishes_before_the_stop(handlers):
    finished = False
    with pytest.raises(signals.Interrupted), signals.deferred():
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.05)
        assert signals.stop_requested()
        finished = True
    assert finished


def test_a_clean_up_that_fails_while_a_stop_unwinds_still_ends_as_stopped(handlers):
    """Lightning's exception hook stops a rich progress bar; when the signal lands before the bar's thread has
    started, that hook raises RuntimeError in place of the stop. The command line still exits as stopped."""

    def predict():
        try:
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)  # the handler raises long before this ends
        except BaseException:
            raise RuntimeError("cannot join thread before it is started") from None

    with pytest.raises(signals.Interrupted) as caught:
        try:
            predict()
        except Exception as error:
            signals.raise_if_stopping(error)
            raise
    assert caught.value.exit_code == 143 and isinstance(caught.value.__cause__, RuntimeError)


def test_an_error_without_a_stop_stays_an_error():
    signals.reset()
    signals.raise_if_stopping(RuntimeError("a real failure"))  # no signal: nothing raised in its place


def test_check_polls_without_a_handler_raise():
    signals.reset()
    signals.check()  # nothing received: no effect
    assert not signals.stop_requested()


@pytest.fixture
def code(tmp_path) -> Path:
    return freeze(tmp_path / "code")


def launch(code: Path, run_dir: Path, cache_dir: Path, *extra: str) -> subprocess.Popen:
    return popen(code, [*RUN, *extra, f"hydra.run.dir={run_dir}"], cache_dir)


def journal_lines(path: Path) -> int:
    return len(path.read_text().splitlines()) if path.exists() else 0


def wait_for_rows(proc: subprocess.Popen, journals, at_least: int, timeout: float = 600) -> None:
    deadline = time.time() + timeout
    while sum(journal_lines(p) for p in journals()) < at_least:
        if proc.poll() is not None:
            raise AssertionError(f"ended before the signal (rc {proc.returncode}): {proc.stdout.read()[-3000:]}")
        assert time.time() < deadline, "no rows in time"
        time.sleep(0.05)


def stop(proc: subprocess.Popen, signum: int) -> tuple[float, str]:
    """Send ``signum`` to the harness process alone (as `timeout` or `docker stop` do); seconds to exit."""
    sent = time.time()
    proc.send_signal(signum)
    try:
        out, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    return time.time() - sent, out


def answers(run_dir: Path) -> pd.DataFrame:
    rows = pd.read_parquet(run_dir / "rows.parquet")
    return rows[["question_id", "answer", "em", "f1", "context"]].sort_values("question_id").reset_index(drop=True)


@pytest.mark.slow
def test_sigterm_mid_read_stops_fast_and_resumes_exactly(tmp_path, code):
    run_dir, cache = tmp_path / "run", tmp_path / "cache"
    journal = run_dir / "rows.journal.jsonl"
    proc = launch(code, run_dir, cache)
    wait_for_rows(proc, lambda: [journal], at_least=2)  # reading is underway, 8 questions in all
    seconds, out = stop(proc, signal.SIGTERM)
    assert proc.returncode == 128 + signal.SIGTERM, out[-3000:]
    assert seconds <= 5, f"took {seconds:.1f} s to stop"
    assert not (run_dir / "summary.json").exists()
    journaled = journal_lines(journal)
    assert 2 <= journaled < 8, "stopped too late to test resumption"

    resumed = launch(code, run_dir, cache)
    out, _ = resumed.communicate(timeout=900)
    assert resumed.returncode == 0, out[-3000:]
    assert "resuming: " in out and not (run_dir / "rows.journal.stale.jsonl").exists(), out[-3000:]
    lines = [json.loads(line) for line in journal.read_text().splitlines()]
    ids = [row["question_id"] for row in lines]
    assert len(ids) == 8 and len(set(ids)) == 8, "a row was lost or written twice"
    summary = json.loads((run_dir / "summary.json").read_text())
    # Answers of the chunk cut short were cached as each batch finished: the relaunch generates at most
    # the prompts without a journaled row.
    assert summary["counters"]["reader_prompts_generated"] <= 8 - journaled

    clean_dir = tmp_path / "clean"
    clean = launch(code, clean_dir, tmp_path / "cache_clean")
    out, _ = clean.communicate(timeout=900)
    assert clean.returncode == 0, out[-3000:]
    pd.testing.assert_frame_equal(answers(run_dir), answers(clean_dir))


@pytest.mark.slow
def test_sigint_stops_the_whole_sweep(tmp_path, code):
    sweep_dir = tmp_path / "sweep"
    proc = popen(
        code,
        ["-m", "+sweeps=smoke", "reader.batch_size=1", "read_chunk=1", f"hydra.sweep.dir={sweep_dir}"],
        tmp_path / "cache",
    )
    wait_for_rows(proc, lambda: list(sweep_dir.glob("*/rows.journal.jsonl")), at_least=1)
    seconds, out = stop(proc, signal.SIGINT)
    assert proc.returncode == 128 + signal.SIGINT, out[-3000:]
    assert seconds <= 5, f"took {seconds:.1f} s to stop"
    # The sweep stopped, not just its first job: no later job started and none finished.
    assert not list(sweep_dir.glob("*/summary.json"))
    assert sorted(p.name for p in sweep_dir.iterdir() if p.is_dir() and p.name.isdigit()) == ["0"]
    assert not list(sweep_dir.glob("*/error.txt"))


@pytest.mark.slow
def test_sigterm_mid_llama_cpp_batch_exits_within_five_seconds(tmp_path, code):
    """A llama.cpp batch is one native call (four SmolLM2 answers: ~8 s on one core); the stop leaves it behind."""
    run_dir, cache = tmp_path / "run", tmp_path / "cache"
    journal = run_dir / "rows.journal.jsonl"
    args = ["dataset=demo", "dataset.sample_size=8", "reader=smollm2_135m_gguf", "reader.batch_size=4"]
    args += ["read_chunk=4", "logger=none"]
    proc = popen(code, [*args, f"hydra.run.dir={run_dir}"], cache)
    wait_for_rows(proc, lambda: [journal], at_least=4)  # the first batch is read; the second is in flight
    time.sleep(1.0)
    seconds, out = stop(proc, signal.SIGTERM)
    assert proc.returncode == 128 + signal.SIGTERM, out[-3000:]
    assert seconds <= 5, f"took {seconds:.1f} s to stop"
    # The signal landed mid-batch: the run had not finished, and the abandoned batch left no rows.
    assert journal_lines(journal) == 4 and not (run_dir / "summary.json").exists(), out[-3000:]

    resumed = popen(code, [*args, f"hydra.run.dir={run_dir}"], cache)
    out, _ = resumed.communicate(timeout=900)
    assert resumed.returncode == 0, out[-3000:]
    ids = [json.loads(line)["question_id"] for line in journal.read_text().splitlines()]
    assert len(ids) == 8 and len(set(ids)) == 8, "a row was lost or written twice"
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["counters"]["reader_prompts_generated"] == 4  # only the questions without a row


@pytest.mark.slow
def test_sigterm_while_a_server_reader_waits_exits_within_five_seconds(tmp_path, code):
    """Answers in flight from a slow server are left behind, not waited for."""
    from tests.test_read_server import ScriptedServer

    with ScriptedServer(delay=60) as server:
        run_dir = tmp_path / "run"
        args = ["dataset=demo", "reader=openai_compat", f"reader.base_url={server.base_url}", "logger=none"]
        proc = popen(code, [*args, f"hydra.run.dir={run_dir}"], tmp_path / "cache")
        deadline = time.time() + 300
        while not server.requests:
            assert proc.poll() is None, proc.stdout.read()[-3000:]
            assert time.time() < deadline, "no request reached the server"
            time.sleep(0.05)
        seconds, out = stop(proc, signal.SIGTERM)
    assert proc.returncode == 128 + signal.SIGTERM, out[-3000:]
    assert seconds <= 5, f"took {seconds:.1f} s to stop"
    assert not (run_dir / "summary.json").exists()
