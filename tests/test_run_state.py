"""Damaged run directories are detected, reported with their path and recovered from."""

from __future__ import annotations

import json
import logging
import os

import pandas as pd
import pytest

from harness.run.job import finished_summary
from harness.runlog.journal import RowJournal
from harness.runlog.outputs import RunDirectoryError, clean_temporaries, ensure_writable, read_summary
from tests.conftest import TINY_READER
from tests.helpers.frozen_code import freeze, run


def row(qid: str, value: float) -> dict:
    return {"question_id": qid, "f1": value}


def journal_with(tmp_path, payload: bytes) -> RowJournal:
    (tmp_path / "rows.journal.key").write_text("key")
    (tmp_path / "rows.journal.jsonl").write_bytes(payload)
    return RowJournal(tmp_path, "key")


def test_garbage_line_mid_journal_keeps_rows_after_it_and_is_repaired(tmp_path, caplog):
    good = [json.dumps(row(f"q{i}", i / 10)).encode() for i in range(4)]
    journal = journal_with(tmp_path, good[0] + b"\n\xff\xfe garbage {\n" + good[1] + b"\n" + good[2] + b"\n")
    with caplog.at_level(logging.WARNING):
        rows = journal.load()
    assert sorted(rows) == ["q0", "q1", "q2"] and rows["q2"]["f1"] == 0.2
    assert str(journal.path) in caplog.text and "line 2" in caplog.text
    # Rewritten without the bad line: the next load is clean and an append follows valid rows.
    assert journal.path.read_bytes() == good[0] + b"\n" + good[1] + b"\n" + good[2] + b"\n"
    caplog.clear()
    journal.append([row("q3", 0.3)])
    assert sorted(journal.load()) == ["q0", "q1", "q2", "q3"] and "damaged" not in caplog.text
    assert len(journal.path.read_text().splitlines()) == 4


def test_line_without_question_id_is_dropped_not_a_key_error(tmp_path, caplog):
    journal = journal_with(
        tmp_path, b'{"f1": 1.0}\n[1, 2]\n{"question_id": 7}\n' + json.dumps(row("q1", 0.5)).encode() + b"\n"
    )
    with caplog.at_level(logging.WARNING):
        rows = journal.load()
    assert list(rows) == ["q1"]
    assert "no question_id" in caplog.text and str(journal.path) in caplog.text
    assert journal.path.read_text().splitlines() == [json.dumps(row("q1", 0.5))]


def test_torn_tail_is_dropped_and_healed(tmp_path):
    full = json.dumps(row("q0", 0.0)).encode() + b"\n"
    journal = journal_with(tmp_path, full + b'{"question_id": "q1", "f')
    assert list(journal.load()) == ["q0"]
    assert journal.path.read_bytes() == full


def test_garbage_journal_key_sets_the_journal_aside(tmp_path):
    (tmp_path / "rows.journal.key").write_bytes(b"\xff\xfe\x00")
    (tmp_path / "rows.journal.jsonl").write_text(json.dumps(row("q0", 0.0)) + "\n")
    journal = RowJournal(tmp_path, "key")
    assert journal.load() == {} and (tmp_path / "rows.journal.stale.jsonl").exists()


@pytest.mark.parametrize("payload", [b"\x89PNG\r\n\x1a\n\xff\xff", b'{"run_key": ', b"[1, 2]", b""])
def test_damaged_summary_means_unfinished(tmp_path, caplog, payload):
    (tmp_path / "summary.json").write_bytes(payload)
    pd.DataFrame({"question_id": ["q0"]}).to_parquet(tmp_path / "rows.parquet")
    with caplog.at_level(logging.WARNING):
        assert read_summary(tmp_path / "summary.json") is None
        assert finished_summary(tmp_path, "key") is None
    assert str(tmp_path / "summary.json") in caplog.text


def test_valid_summary_is_read(tmp_path):
    (tmp_path / "summary.json").write_text(json.dumps({"run_key": "key"}))
    pd.DataFrame({"question_id": ["q0"]}).to_parquet(tmp_path / "rows.parquet")
    assert finished_summary(tmp_path, "key") == {"run_key": "key"}
    assert finished_summary(tmp_path, "other") is None


def test_leftover_temporaries_are_removed_unless_their_writer_lives(tmp_path):
    dead = tmp_path / ".rows.parquet.tmp-999999999"
    mine = tmp_path / f".summary.json.tmp-{os.getpid()}"
    live = tmp_path / f".rows.parquet.tmp-{os.getppid()}"
    keep = tmp_path / "rows.parquet"
    for path in (dead, mine, live, keep):
        path.write_bytes(b"partial")
    assert sorted(p.name for p in clean_temporaries(tmp_path)) == sorted([dead.name, mine.name])
    assert live.exists() and keep.exists() and not dead.exists() and not mine.exists()


def test_run_directory_that_is_a_file_is_named(tmp_path):
    blocker = tmp_path / "blocker"
    blocker.write_text("")
    with pytest.raises(RunDirectoryError, match=str(blocker / "run")):
        ensure_writable(blocker / "run")


def test_read_only_run_directory_is_named(tmp_path):
    target = tmp_path / "readonly"
    target.mkdir()
    target.chmod(0o555)
    tmp_path.chmod(0o755)
    # root writes anywhere: a forked child drops to an unprivileged user to see what a user would see.
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: report the error text through the pipe, never return into pytest
        code = 1
        try:
            os.close(read_end)
            if os.geteuid() == 0:
                os.setuid(65534)
            ensure_writable(target)
        except RunDirectoryError as error:
            os.write(write_end, str(error).encode())
            code = 3
        finally:
            os._exit(code)
    os.close(write_end)
    with os.fdopen(read_end) as pipe:
        message = pipe.read()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 3, message
    assert message.startswith(f"run directory {target} is not writable"), message


@pytest.mark.slow
def test_relaunch_over_damaged_summary_and_journal_completes(tmp_path):
    code, cache, run_dir = freeze(tmp_path / "code"), tmp_path / "cache", tmp_path / "run"
    # A reading run: it is the one that journals (a read=false run rebuilds its rows and keeps no journal).
    args = [
        "read=true",
        TINY_READER,
        "reader.max_new_tokens=4",
        "logger=none",
        "read_chunk=3",
        f"hydra.run.dir={run_dir}",
    ]
    rc, out = run(code, args, cache)
    assert rc == 0, out[-3000:]
    expected = pd.read_parquet(run_dir / "rows.parquet")
    journal = run_dir / "rows.journal.jsonl"
    lines = journal.read_text().splitlines()
    assert len(lines) == len(expected) == 12

    (run_dir / "summary.json").write_bytes(b"\x00\xff garbage")
    no_id = json.loads(lines[5])
    del no_id["question_id"]
    damaged = [*lines[:3], "\udcff not json", *lines[3:5], json.dumps(no_id), *lines[6:]]
    journal.write_text("\n".join(damaged) + "\n", errors="surrogateescape")
    (run_dir / ".rows.parquet.tmp-999999999").write_bytes(b"partial")

    rc, out = run(code, args, cache)
    assert rc == 0, out[-3000:]
    assert f"damaged {run_dir / 'summary.json'}" in out and f"row journal {journal} is damaged" in out
    assert "resuming: 11 of 12" in out
    assert not (run_dir / ".rows.parquet.tmp-999999999").exists()
    ids = [json.loads(line)["question_id"] for line in journal.read_text().splitlines()]
    assert len(ids) == 12 and len(set(ids)) == 12
    rows = pd.read_parquet(run_dir / "rows.parquet")
    key = expected.columns.drop([c for c in expected.columns if c.startswith("cfg.paths")])
    pd.testing.assert_frame_equal(
        rows[key].sort_values("question_id").reset_index(drop=True),
        expected[key].sort_values("question_id").reset_index(drop=True),
    )
    assert json.loads((run_dir / "summary.json").read_text())["n_questions"] == 12
