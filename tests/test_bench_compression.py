"""The compression benchmark of docs/benchmarks.md, run as documented on two questions of four paragraphs each:
one row per dtype the CPU computes, every compression within the budget once truncated, and a second budget's
texts the same with the documents' ranking remembered as computed afresh. (Ten paragraphs a
question took 37 s on one AMX core and 56 s with bf16 kept off AMX, as on CPUs without it: the compressor's
forward passes grow with the context, and what is checked here is the script, not its figures.)"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from harness.backends.precision import cpu_dtype, cpu_flags
from tests.conftest import REPO, SHARED_DATA

SAMPLE = SHARED_DATA / "hotpotqa" / "hotpot_dev_distractor_v1_100.json"  # the benchmark's default data


@pytest.mark.slow
@pytest.mark.skipif(not (SHARED_DATA / "hotpotqa").is_dir(), reason="shared HotpotQA sample not present")
def test_the_documented_compression_benchmark_prints_a_row_per_dtype(tmp_path):
    figures = tmp_path / "figures.json"
    records = json.loads(SAMPLE.read_text(encoding="utf-8"))[:2]
    for record in records:  # the two gold paragraphs stay: supporting_facts name them
        gold = {title for title, _ in record["supporting_facts"]}
        record["context"] = [p for p in record["context"] if p[0] in gold] + [
            p for p in record["context"] if p[0] not in gold
        ][:2]
    data = tmp_path / "two_questions.json"
    data.write_text(json.dumps(records), encoding="utf-8")
    command = [sys.executable, "benchmarks/bench_compression.py", "--questions", "2", "--budget", "160"]
    command += ["--data", str(data)]
    out = subprocess.run(
        [*command, "--json", str(figures)], cwd=REPO, capture_output=True, text=True, timeout=300, check=True
    ).stdout
    printed = json.loads(figures.read_text())
    rows = printed["dtypes"]
    expected = ["float32"] + (["bfloat16"] if cpu_dtype(cpu_flags()) == "bfloat16" else [])
    assert [row["dtype"] for row in rows] == expected
    assert all(0 < row["mean_tokens"] <= 160 for row in rows)
    assert "| float32 | float32\\|cpu |" in out  # the numerics' own bar escaped in the markdown table
    ranking = printed["ranking"]
    assert ranking["budget"] == 128 and ranking["same_text"] == ranking["timed"] == 1
    assert "s/question with the ranking remembered" in out
