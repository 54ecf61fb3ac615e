"""A run over a malformed dataset file fails before writing results, with a short message naming the file."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def _record(i: int) -> dict:
    return {
        "_id": f"q{i}",
        "question": f"Question {i}?",
        "answer": "X",
        "type": "bridge",
        "level": "easy",
        "supporting_facts": [["A", 0], ["B", 0]],
        "context": [["A", ["A is X. " * 20]], ["B", ["B is Z. " * 20]]],
    }


def _truncated(path: Path) -> str:
    text = json.dumps([_record(0), _record(1), _record(2)])
    path.write_text(text[: text.index('"q2"') + 8], encoding="utf-8")
    return "record 2: invalid or truncated JSON"


def _non_utf8(path: Path) -> str:
    # Several MB of valid records, then one bad byte: the message must not carry the file.
    lines = [json.dumps(_record(i)).encode() for i in range(6000)]
    data = b"\n".join(lines) + b"\n"
    offset = data.index(b'"q4321"') + 2
    path.write_bytes(data[:offset] + b"\xff" + data[offset:])
    return f"record 4321: not UTF-8: byte 0xff at byte offset {offset} (line 4322)"


@pytest.mark.process
@pytest.mark.parametrize("make", [_truncated, _non_utf8], ids=["truncated", "non_utf8"])
def test_run_on_a_malformed_dataset_exits_nonzero_without_summary(tmp_path, make):
    bad = tmp_path / "hotpot_bad.json"
    expected = make(bad)
    run_dir = tmp_path / "run"
    env = {**os.environ, "HARNESS_CACHE_DIR": str(tmp_path / "cache"), "WANDB_MODE": "disabled"}
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "harness",
            "dataset=hotpotqa",
            f"dataset.path={bad}",
            "read=false",
            "logger=none",
            f"hydra.run.dir={run_dir}",
        ],
        check=False,
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode != 0, result.stderr[-2000:]
    output = result.stdout + result.stderr
    assert f"{bad}: {expected}" in output, output[-2000:]
    assert len(output.encode()) < 20_000  # the file is several MB; none of it may be echoed
    assert not (run_dir / "summary.json").exists()
    assert not (run_dir / "rows.parquet").exists()
