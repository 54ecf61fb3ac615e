"""Trees inside the pipeline on the shared QASPER sample: collapsed-tree retrieval under the budget.

The tree's LM is swapped for the fake chat LM (summaries in milliseconds); the encoder, the reader's
tokenizer, the loader, the packer and the budget checks are the real ones.
"""

from __future__ import annotations

import pytest
from omegaconf import OmegaConf

from harness.pipeline import Pipeline
from tests.conftest import SHARED_DATA, compose_cfg

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
