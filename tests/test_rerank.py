"""Cross-encoder stage plumbing, with a small RANDOMLY INITIALISED cross-encoder built here (no reranker
weights ship on PyPI): this checks reordering, score plumbing and caching, not reranking quality."""

from __future__ import annotations

import numpy as np
import pytest

from harness.retrieve.encoder import resolve_model_path
from harness.retrieve.rerank import CrossEncoderReranker
from tests.conftest import make_pool


@pytest.fixture(scope="module")
def tiny_cross_encoder(tmp_path_factory):
    from transformers import AutoTokenizer, BertConfig, BertForSequenceClassification

    folder = tmp_path_factory.mktemp("tiny-ce")
    tokenizer = AutoTokenizer.from_pretrained(resolve_model_path("offline:all-MiniLM-L6-v2"))
    config = BertConfig(
        vocab_size=tokenizer.vocab_size,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        num_labels=1,
    )
    import torch

    torch.manual_seed(0)
    BertForSequenceClassification(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return str(folder)


def test_rerank_orders_by_cross_encoder_score_and_caches(tiny_cross_encoder, tmp_path):
    pools = [make_pool(n_docs=6, seed=s) for s in range(2)]
    reranker = CrossEncoderReranker(model=tiny_cross_encoder, cache_dir=str(tmp_path))
    out = reranker.rerank(pools)
    for before, after in zip(pools, out, strict=False):
        scores = [c.score for c in after.candidates]
        assert scores == sorted(scores, reverse=True)
        assert {c.cand_id for c in after.candidates} == {c.cand_id for c in before.candidates}
        by_id = {c.cand_id: i for i, c in enumerate(before.candidates)}
        for row, cand in zip(after.embeddings, after.candidates, strict=False):
            np.testing.assert_array_equal(row, before.embeddings[by_id[cand.cand_id]])
    again = CrossEncoderReranker(model=tiny_cross_encoder, cache_dir=str(tmp_path))
    assert [c.cand_id for c in again.rerank(pools)[0].candidates] == [c.cand_id for c in out[0].candidates]
    assert again._model is None  # every score came from the cache
