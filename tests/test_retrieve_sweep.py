"""Sparse and hybrid pools go through every later stage unchanged: a sweep over retriever=minilm,bm25,hybrid
runs end to end, and on BM25 pools of an open corpus the injection, a summary tree, a diversifier that needs
vectors and three packers run, and the report reads both sweeps (read=false: nothing reads)."""

from __future__ import annotations

import json
import os

import pandas as pd
import pytest

from tests.conftest import REPO, TINY_READER
from tests.helpers.built_once import built_once
from tests.helpers.doc_commands import run_in_one_process

COMMON = ["read=false", "logger=none", TINY_READER, "dataset.sample_size=6"]
# DTCRS over the pool with a scripted chat LM and a reducer small enough for the demo's few paragraphs.
TREE = [
    "tree=dtcrs",
    "tree.reduction_dim=2",
    "tree.reducer=pca",
    "~tree.lm",
    "+tree.lm._target_=tests.helpers.tree_fakes.FakeChatLM",
]


@pytest.fixture(scope="module")
def sweeps(tmp_path_factory):
    return built_once(tmp_path_factory, "retriever-sweeps", run_sweeps)  # once for both test workers


def run_sweeps(root):
    retrievers = ["-m", "retriever=minilm,bm25,hybrid", *COMMON, f"hydra.sweep.dir={root / 'retrievers'}"]
    downstream = [
        "-m", "retriever=bm25", "retriever.setting=open", "perturb=inject", *TREE, "diversifier=mmr",
        "packer=packed,submod,focused", *COMMON, f"hydra.sweep.dir={root / 'bm25'}",
    ]  # fmt: skip
    report = [str(root / "retrievers"), str(root / "bm25"), "--out", str(root / "report")]
    jobs = [
        {"argv": ["harness", *retrievers]},
        {"argv": ["harness", *downstream]},
        {"argv": ["harness.report", *report, "--resamples", "200", "--quiet", "--no-plots"]},
    ]
    env = {**os.environ, "HARNESS_CACHE_DIR": str(root / "cache"), "WANDB_MODE": "disabled"}
    assert run_in_one_process(jobs, REPO, env, timeout=170) == [0, 0, 0]


def rows(folder) -> list[pd.DataFrame]:
    return [pd.read_parquet(path) for path in sorted(folder.glob("*/rows.parquet"))]


@pytest.mark.slow
def test_a_sweep_over_the_three_retrievers_runs_end_to_end(sweeps):
    jobs = rows(sweeps / "retrievers")
    assert [job["retriever"].iloc[0] for job in jobs] == ["minilm", "bm25", "hybrid"]
    assert [job["cfg.retriever._target_"].iloc[0].rsplit(".", 1)[1] for job in jobs] == [
        "DenseRetriever", "SparseRetriever", "HybridRetriever",
    ]  # fmt: skip
    hybrid = jobs[2]
    assert set(hybrid["cfg.retriever.fusion"]) == {"rrf"} and set(hybrid["cfg.retriever.rrf_k"]) == {60}
    assert set(jobs[1]["cfg.retriever.bm25.variant"]) == {"lucene"}
    for job in jobs:
        assert len(job) == 6 and job["recall_at_k"].between(0, 1).all()
        assert (job["context_tokens"] <= 160).all() and job["answer_in_context"].notna().all()
    # The pools are the retrievers' own: BM25's and the fused scores are not MiniLM's cosines.
    scores = [json.loads(job["pool"].iloc[0])[0]["score"] for job in jobs]
    assert -1 <= scores[0] <= 1 and scores[1] > 1 and 0 < scores[2] <= round(2 / 61, 4)  # RRF at most 2 / (k + 1)


@pytest.mark.slow
def test_injection_trees_diversifiers_packers_and_reports_run_on_bm25_pools(sweeps):
    jobs = rows(sweeps / "bm25")
    assert [job["packer"].iloc[0] for job in jobs] == ["packed", "submod", "focused"]
    for job in jobs:
        assert set(job["retriever"]) == {"bm25"} and set(job["cfg.retriever.setting"]) == {"open"}
        assert (job["pool_redundancy"] > 0).all()  # the injected copies are near-duplicates of their sources
        assert (job["tree.summary_nodes"] > 0).any() and set(job["diversifier"]) == {"mmr"}
        assert (job["context_tokens"] <= 160).all()
    report = (sweeps / "report" / "report.md").read_text()
    for policy in ("retriever=bm25", "retriever=hybrid", "retriever=minilm", "packer=submod"):
        assert policy in report, policy
