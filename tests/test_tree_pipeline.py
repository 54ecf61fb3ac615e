"""Trees inside the pipeline on the shared QASPER sample: collapsed-tree retrieval under the budget, and
the DTCRS classifiers' row facts (class, source, parsed, annotated class).

The tree's LM is swapped for the fake chat LM (summaries in milliseconds); the encoder, the reader's
tokenizer, the loader, the packer and the budget checks are the real ones.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import replace

import pytest
from omegaconf import OmegaConf

from harness.data.qasper import load_qasper
from harness.run.pipeline import Pipeline
from harness.tree.base import TreeServices
from harness.tree.dtcrs import DynamicTree
from tests.conftest import SHARED_DATA, compose_cfg
from tests.helpers.tree_fakes import BagOfWordsEncoder, FakeChatLM, WordTokens, make_long_pool

QASPER = SHARED_DATA / "qasper" / "qasper-original-sample.json"


def tree_config(tree: str, tmp_path, budget: int):
    cfg = compose_cfg(
        [
            "experiment=trees_qasper",
            f"tree={tree}",
            f"dataset.path={QASPER}",
            "dataset.answer_types=[abstractive]",
            "dataset.sample_size=3",
            "logger=none",
            f"paths.cache_dir={tmp_path}",
            f"budget={budget}",
            "tree.reducer=pca",
            "packer.misfit=stop_at_first_misfit",  # RAPTOR's collapsed tree: whole nodes only
        ],
    )
    cfg.tree.lm = OmegaConf.create({"_target_": "tests.helpers.tree_fakes.FakeChatLM"})
    return cfg


@pytest.mark.slow  # about a minute per tree on 2 CPU cores: real encoder, BIC searches over 100+ chunks
@pytest.mark.skipif(not QASPER.exists(), reason="shared QASPER sample not present")
@pytest.mark.parametrize("tree", ["raptor", "dtcrs"])
def test_tree_nodes_are_packed_whole_within_the_budget(tree, tmp_path):
    cfg = tree_config(tree, tmp_path, budget=400)
    pipeline = Pipeline(cfg)
    examples = pipeline.load()
    assert len(examples) == 3 and all(e.qtype == "abstractive" for e in examples)
    prepared = pipeline.prepare(examples)
    tokens = pipeline.reader.token_counter
    summaries_packed = 0
    for item in prepared:
        summary_nodes = item.figures["tree.summary_nodes"]
        assert summary_nodes > 0
        assert len(item.pool.candidates) == len(item.pool.example.documents) + summary_nodes
        assert tokens.count(item.context_text) <= 400
        # Whole candidates: every packed snippet is a complete node of the pool.
        texts = {c.cand_id: c.text for c in item.pool.candidates}
        assert all(s.text == texts[s.cand_id] for s in item.context.snippets)
        summaries_packed += sum(s.cand_id.startswith("tree:") for s in item.context.snippets)
    assert summaries_packed > 0


def _services():
    return TreeServices(encoder=BagOfWordsEncoder(), tokens=WordTokens(), seed=0)


SETTINGS = {"reducer": "pca", "reduction_dim": 2, "max_cluster_tokens": None}


def test_annotation_classifier_builds_for_annotated_abstractive_questions_only():
    tree = DynamicTree(lm=FakeChatLM(question_class="extractive"), classifier="annotation", **SETTINGS)
    _, info = tree.expand(make_long_pool(qtype="abstractive"), _services())
    assert info["built"] is True and info["summary_nodes"] > 0  # the LM's "extractive" is never asked
    assert (info["classifier"], info["question_class"], info["class_source"]) == (
        "annotation",
        "abstractive",
        "annotation",
    )
    assert info["annotated_class"] == "abstractive" and info["lm_parsed"] is None
    pool = make_long_pool(qtype="")  # no annotated type: counted, not guessed, no tree
    out, info = tree.expand(pool, _services())
    assert out is pool and info["built"] is False
    assert info["question_class"] == info["annotated_class"] == "unannotated" and info["annotators"] == 0
    assert DynamicTree(lm=FakeChatLM(), classifier="gold", **SETTINGS).classifier == "annotation"
    with pytest.raises(ValueError, match="classifier"):
        DynamicTree(lm=FakeChatLM(), classifier="oracle")


def test_lm_classifier_rows_record_the_annotated_class_and_the_unparsed_echo():
    lm = FakeChatLM(question_class="Extractive, abstractive, yes/")
    tree = DynamicTree(lm=lm, classifier="lm", classify_by="generation", **SETTINGS)
    _, info = tree.expand(make_long_pool(question="What fuel does the rocket use?", qtype="yes_no"), _services())
    assert (info["question_class"], info["class_source"], info["lm_parsed"]) == ("extractive", "rules", False)
    assert info["class_raw"] == "Extractive, abstractive, yes/" and info["annotated_class"] == "yes_no"
    assert info["built"] is False


@pytest.mark.skipif(not QASPER.exists(), reason="shared QASPER sample not present")
def test_qasper_rows_carry_the_annotators_majority_class():
    examples = load_qasper(QASPER, chunk_tokens=500)
    tree = DynamicTree(lm=FakeChatLM(), classifier="annotation", tree_classes=[], **SETTINGS)
    services = _services()
    counts: Counter[str] = Counter()
    for example in examples:
        pool = replace(make_long_pool(question=example.question), example=example)
        _, info = tree.expand(pool, services)
        types = example.metadata["answer_types"]
        top = max(Counter(types).values())
        majority = next(t for t in types if Counter(types)[t] == top)  # ties: the first annotator's
        assert info["annotated_class"] == majority == info["question_class"] and info["built"] is False
        assert math.isclose(info["annotator_agreement"], top / len(types)) and info["annotators"] == len(types)
        counts[info["annotated_class"]] += 1
    # Every question of the sample is annotated.
    assert sum(counts.values()) == len(examples) == 51 and "unannotated" not in counts
    assert counts["abstractive"] >= 10
