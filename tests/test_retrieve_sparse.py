"""retriever=bm25 and retriever=hybrid: scores worked out by hand, pools shaped as the dense retriever's (the
same open corpus, the encoder's vectors), the open corpus's index cached on disk, and both fusions."""

from __future__ import annotations

import math

import numpy as np
import pytest

from harness.core.types import Document, Example
from harness.retrieve import bm25 as bm25_module
from harness.retrieve.bm25 import BM25Settings, index_key, tokenize
from harness.retrieve.corpus import document_text, top_by_score
from harness.retrieve.dense import DenseRetriever
from harness.retrieve.fusion import min_max, reciprocal_rank_fusion, weighted_fusion
from harness.retrieve.hybrid import HybridRetriever
from harness.retrieve.sparse import SparseRetriever
from tests.conftest import HashEncoder

NODE = {
    "variant": "lucene", "k1": 1.5, "b": 0.75, "delta": 0.5,
    "tokenizer": "sklearn", "stopwords": "en", "stemmer": "english",
}  # fmt: skip


def fruit() -> list[Example]:
    """One question over three untitled one-sentence documents of 2, 3 and 1 words."""
    docs = tuple(
        Document(f"f::{i}", "", (text,)) for i, text in enumerate(["apple banana", "apple apple cherry", "banana"])
    )
    return [Example("f", "An apple?", ("x",), ("f::1",), docs)]


def shared_paragraph() -> list[Example]:
    """Two questions holding the same paragraph under their own ids (the dense retriever's test set)."""
    shared = Document("a::0", "Shared", ("The same paragraph appears in two questions.",))
    return [
        Example("a", "question one?", ("x",), ("a::0",), (shared, Document("a::1", "Other", ("Unrelated text.",)))),
        Example(
            "b",
            "which paragraph appears twice?",
            ("y",),
            ("b::1",),
            (Document("b::0", "Shared", shared.sentences), Document("b::1", "Gold B", ("Gold text for b.",))),
        ),
    ]


@pytest.mark.parametrize(
    "variant,expected",
    [
        # N = 3 documents, "appl" in n = 2, lengths 2, 3, 1 (avgdl 2); k1 = 1.5, b = 0.75.
        # lucene: idf log(1 + (N - n + 0.5) / (n + 0.5)) = log 1.6; tf part tf / (tf + k1 (1 - b + b dl / avgdl)).
        ("lucene", {1: math.log(1.6) * 2 / (2 + 1.5 * 1.375), 0: math.log(1.6) * 1 / (1 + 1.5 * 1.0), 2: 0.0}),
        # atire: idf log(N / n) = log 1.5; tf part tf (k1 + 1) / (tf + k1 (1 - b + b dl / avgdl)).
        ("atire", {1: math.log(1.5) * 5 / (2 + 1.5 * 1.375), 0: math.log(1.5) * 2.5 / (1 + 1.5), 2: 0.0}),
    ],
)
def test_scores_worked_out_by_hand(variant, expected):
    pool = SparseRetriever(HashEncoder(), bm25={**NODE, "variant": variant}).retrieve(fruit())[0]
    assert [c.cand_id for c in pool.candidates] == ["f::1", "f::0", "f::2"]
    assert [c.score for c in pool.candidates] == pytest.approx([expected[1], expected[0], expected[2]], rel=1e-12)


def test_tokens_are_lowercased_split_stopped_and_stemmed():
    settings = BM25Settings.of(NODE)
    assert tokenize(settings, ["The Running of the Bulls, 2019!"]) == [["run", "bull", "2019"]]
    assert tokenize(BM25Settings.of({**NODE, "stemmer": None, "stopwords": None, "tokenizer": "word"}), ["A cat"]) == [
        ["a", "cat"]
    ]


def test_pools_carry_the_encoders_vectors_of_what_they_retrieved(hash_encoder):
    examples = shared_paragraph()
    pools = SparseRetriever(hash_encoder, setting="distractor", pool_size=1, bm25=NODE).retrieve(examples)
    reference = HashEncoder()
    for ex, pool in zip(examples, pools, strict=True):
        assert len(pool.candidates) == 1
        chosen = ex.document(pool.candidates[0].cand_id)
        np.testing.assert_array_equal(pool.embeddings, reference.encode([document_text(chosen)]))
        np.testing.assert_array_equal(pool.query_embedding, reference.encode([ex.question])[0])
    assert pools[1].candidates[0].cand_id == "b::0"  # "paragraph", "appears" match; "twice" matches nothing


def test_open_pools_credit_documents_as_the_dense_retriever_does(hash_encoder):
    examples = shared_paragraph()
    sparse = SparseRetriever(hash_encoder, setting="open", bm25=NODE).retrieve(examples)
    dense = DenseRetriever(hash_encoder, setting="open").retrieve(examples)
    for sparse_pool, dense_pool in zip(sparse, dense, strict=True):
        # the shared paragraph indexed once, credited under each question's own id
        assert len(sparse_pool.candidates) == 3
        assert {c.cand_id for c in sparse_pool.candidates} == {c.cand_id for c in dense_pool.candidates}
    assert sparse[1].candidates[0].cand_id == "b::0" and "a::0" not in {c.cand_id for c in sparse[1].candidates}


def test_the_open_index_is_stored_and_reloaded_and_a_damaged_one_rebuilt(tmp_path, monkeypatch, caplog):
    examples = shared_paragraph()

    def retrieve(node=NODE):
        return SparseRetriever(HashEncoder(), setting="open", bm25=node, cache_dir=str(tmp_path)).retrieve(examples)

    first = retrieve()
    assert (tmp_path / "bm25.sqlite").is_file()
    built = []
    original = bm25_module.BM25Index.build
    monkeypatch.setattr(bm25_module.BM25Index, "build", lambda *a: built.append(1) or original(*a))
    again = retrieve()
    assert built == [] and [[(c.cand_id, c.score) for c in p.candidates] for p in again] == [
        [(c.cand_id, c.score) for c in p.candidates] for p in first
    ]
    retrieve({**NODE, "k1": 1.2})  # other settings: another entry
    assert built == [1]
    texts = [document_text(d) for d in (examples[0].documents + examples[1].documents[1:])]
    key = index_key(BM25Settings.of(NODE), texts)
    bm25_module.CheckedStore(tmp_path / "bm25.sqlite", table="bm25").put_payloads({key: b"not an npz"})
    assert [[c.cand_id for c in p.candidates] for p in retrieve()] == [[c.cand_id for c in p.candidates] for p in first]
    assert built == [1, 1] and "is unusable" in caplog.text


def test_reciprocal_rank_fusion_and_weighted_sum_by_hand():
    dense, sparse = np.array([0.9, 0.1, 0.5]), np.array([1.0, 3.0, 2.0])
    # ranks: dense 1, 3, 2; sparse 3, 1, 2
    fused = reciprocal_rank_fusion([dense, sparse], 60)
    np.testing.assert_allclose(fused, [1 / 61 + 1 / 63, 1 / 63 + 1 / 61, 2 / 62])
    assert top_by_score(fused, 3).tolist() == [0, 1, 2]  # 0 and 1 tie: the earlier document first
    # normalised: dense 1, 0, 0.5; sparse 0, 1, 0.5
    np.testing.assert_allclose(weighted_fusion(dense, sparse, 0.25), [0.25, 0.75, 0.5])
    np.testing.assert_array_equal(min_max(np.array([2.0, 2.0])), [0.0, 0.0])


@pytest.mark.parametrize("fusion", ["rrf", "weighted"])
@pytest.mark.parametrize("setting", ["distractor", "open"])
def test_hybrid_pools_rank_by_the_fused_dense_and_bm25_scores(fusion, setting):
    examples = shared_paragraph() + fruit()
    hybrid = HybridRetriever(HashEncoder(), setting=setting, bm25=NODE, fusion=fusion, rrf_k=10, dense_weight=0.3)
    pools = hybrid.retrieve(examples)
    sparse = SparseRetriever(HashEncoder(), setting=setting, bm25=NODE).retrieve(examples)
    encoder = HashEncoder()
    for ex, pool, sparse_pool in zip(examples, pools, sparse, strict=True):
        texts = {c.cand_id: document_text(Document("", c.title, c.sentences)) for c in sparse_pool.candidates}
        ids = sorted(texts)
        bm25 = {c.cand_id: c.score for c in sparse_pool.candidates}
        cosine = encoder.encode([texts[i] for i in ids]) @ encoder.encode([ex.question])[0]
        if fusion == "rrf":
            fused = reciprocal_rank_fusion([cosine, np.array([bm25[i] for i in ids])], 10)
        else:
            fused = weighted_fusion(cosine, np.array([bm25[i] for i in ids]), 0.3)
        expected = dict(zip(ids, fused, strict=True))
        assert {c.cand_id for c in pool.candidates} == set(ids)
        assert [c.score for c in pool.candidates] == pytest.approx([expected[c.cand_id] for c in pool.candidates])
        assert [c.score for c in pool.candidates] == sorted((c.score for c in pool.candidates), reverse=True)
        np.testing.assert_allclose(pool.embeddings, encoder.encode([texts[c.cand_id] for c in pool.candidates]))


def test_invalid_settings_name_their_key():
    with pytest.raises(ValueError, match=r"retriever\.bm25\.variant='okapi' is out of range"):
        SparseRetriever(HashEncoder(), bm25={**NODE, "variant": "okapi"})
    with pytest.raises(ValueError, match=r"retriever\.bm25\.b=1\.5 .*retriever\.bm25\.stemmer='klingon'"):
        SparseRetriever(HashEncoder(), bm25={**NODE, "b": 1.5, "stemmer": "klingon"})
    with pytest.raises(ValueError, match=r"retriever\.bm25\.k1 is missing"):
        BM25Settings.of({k: v for k, v in NODE.items() if k != "k1"})
    with pytest.raises(ValueError, match=r"retriever\.fusion='max'"):
        HybridRetriever(HashEncoder(), bm25=NODE, fusion="max")
    with pytest.raises(ValueError, match=r"retriever\.setting must be"):
        SparseRetriever(HashEncoder(), setting="closed", bm25=NODE)
