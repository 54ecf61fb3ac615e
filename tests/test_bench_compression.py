"""The compression benchmark of docs/benchmarks.md, run as documented on two questions: one row per dtype the
CPU computes, every compression within the budget once truncated."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from harness.backends.precision import cpu_dtype, cpu_flags
from tests.conftest import REPO, SHARED_DATA


@pytest.mark.slow
@pytest.mark.skipif(not (SHARED_DATA / "hotpotqa").is_dir(), reason="shared HotpotQA sample not present")
def test_the_documented_compression_benchmark_prints_a_row_per_dtype(tmp_path):
    figures = tmp_path / "figures.json"
    command = [sys.executable, "benchmarks/bench_compression.py", "--questions", "2", "--budget", "160"]
    out = subprocess.run(
        [*command, "--json", str(figures)], cwd=REPO, capture_output=True, text=True, timeout=300, check=True
    ).stdout
    rows = json.loads(figures.read_text())
    expected = ["float32"] + (["bfloat16"] if cpu_dtype(cpu_flags()) == "bfloat16" else [])
    assert [row["dtype"] for row in rows] == expected
    assert all(0 < row["mean_tokens"] <= 160 for row in rows)
    assert "| float32 | float32\\|cpu |" in out  # the numerics' own bar escaped in the markdown table
