"""The retriever table of docs/retrievers.md, made by its documented command on four questions: one row per
retriever and setting, each figure the mean of the sweep's own rows inside its bootstrap interval."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pandas as pd
import pytest

from tests.conftest import REPO, SHARED_DATA

FULLWIKI = SHARED_DATA / "hotpotqa_fullwiki" / "hotpot_fullwiki_dev_sample.jsonl"


@pytest.mark.slow
@pytest.mark.skipif(not FULLWIKI.is_file(), reason="shared fullwiki sample not present")
def test_the_documented_retriever_table_on_four_questions(tmp_path):
    assert "benchmarks/bench_retrievers.py" in (REPO / "docs" / "retrievers.md").read_text()
    out, figures = tmp_path / "sweep", tmp_path / "figures.json"
    command = [sys.executable, "benchmarks/bench_retrievers.py", "--questions", "4", "--resamples", "200"]
    done = subprocess.run(
        [*command, "--out", str(out), "--json", str(figures)],
        cwd=REPO,
        env={**os.environ, "HARNESS_CACHE_DIR": str(tmp_path / "cache")},
        capture_output=True,
        text=True,
        timeout=170,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    entries = json.loads(figures.read_text())
    assert [(e["setting"], e["retriever"]) for e in entries] == [
        (setting, retriever) for setting in ("distractor", "open") for retriever in ("minilm", "bm25", "hybrid")
    ]
    rows = pd.concat(pd.read_parquet(p) for p in out.glob("*/rows.parquet"))
    assert set(rows["diversifier"]) == {"none"} and set(rows["budget"]) == {160} and set(rows["k"]) == {5}
    assert set(rows["cfg.retriever.pool_size"]) == {10}
    for entry in entries:
        mine = rows[(rows["retriever"] == entry["retriever"]) & (rows["cfg.retriever.setting"] == entry["setting"])]
        assert entry["n"] == mine["question_id"].nunique() == 4
        for column in ("recall_at_k", "s_recall", "answer_in_context"):
            figure = entry[column]
            assert figure["mean"] == pytest.approx(mine[column].mean()), (entry["retriever"], column)
            if figure["n"] > 1:
                assert figure["low"] <= figure["mean"] <= figure["high"]
        baseline = rows[(rows["retriever"] == "minilm") & (rows["cfg.retriever.setting"] == entry["setting"])]
        paired = mine.merge(baseline, on="question_id", suffixes=("", "_minilm"))
        assert ("vs_minilm" in entry) == (entry["retriever"] != "minilm")
        for column, figure in entry.get("vs_minilm", {}).items():
            difference = (paired[column] - paired[f"{column}_minilm"]).mean()  # NaN pairs left out, as there
            assert figure["mean_diff"] == pytest.approx(difference), (entry["retriever"], column)
    table = [line for line in done.stdout.splitlines() if line.startswith("| ")]
    assert len(table) == 7 and table[0].startswith("| setting | retriever | questions | recall@5 | S-Recall@5 |")
    assert table[0].endswith("| Δrecall@5 vs minilm | Δanswer in context (B = 160) vs minilm |")
    assert "CPU kind " in done.stdout and "diversifier=none" in done.stdout
