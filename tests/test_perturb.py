import numpy as np
import pytest

from harness.perturb.chunking import OverlappingChunks, word_windows
from harness.perturb.inject import NearDuplicateInjection
from tests.conftest import make_pool


def test_word_windows_by_hand():
    text = " ".join(f"w{i}" for i in range(10))
    # window 4, overlap 0.5 -> stride 2: starts 0, 2, 4, 6 (the window at 6 reaches the end)
    assert word_windows(text, 4, 0.5) == ["w0 w1 w2 w3", "w2 w3 w4 w5", "w4 w5 w6 w7", "w6 w7 w8 w9"]
    assert word_windows(text, 4, 0.0) == ["w0 w1 w2 w3", "w4 w5 w6 w7", "w8 w9"]
    assert word_windows("", 4, 0.0) == []


def test_injection_freezes_pool_size_and_keeps_sources(hash_encoder):
    pools = [make_pool(n_docs=10, seed=s) for s in range(4)]
    out = NearDuplicateInjection(rho=0.5).apply(pools, hash_encoder, seed=3)
    for clean, noisy in zip(pools, out, strict=False):
        assert len(noisy.candidates) == len(clean.candidates)
        originals = {c.cand_id: c for c in clean.candidates}
        for cand in noisy.candidates:
            if cand.kind == "copy":
                source = originals[cand.cand_id.split(":", 1)[1]]
                assert cand.source_ids == source.source_ids
                assert sorted(cand.sentences) == sorted(source.sentences)
                assert cand.sentences != source.sentences  # shuffled, not an exact duplicate
        scores = [c.score for c in noisy.candidates]
        assert scores == sorted(scores, reverse=True)
        np.testing.assert_allclose(noisy.embeddings @ noisy.query_embedding, scores, rtol=1e-5)


def test_injection_counts_and_gold_share(hash_encoder):
    pool = make_pool(n_docs=10, gold=(0, 1))
    inj = NearDuplicateInjection(rho=1.0, gold_share=0.5)
    copies = inj._copies(pool, np.random.default_rng(0))
    assert len(copies) == 10
    gold = set(pool.example.gold_doc_ids)
    assert sum(bool(gold & set(c.source_ids)) for c in copies) >= 5  # half drawn from gold, more by chance


def test_injection_is_deterministic_and_rho_zero_is_identity(hash_encoder):
    pools = [make_pool(n_docs=8, seed=1)]
    a = NearDuplicateInjection(rho=0.25).apply(pools, hash_encoder, seed=42)
    b = NearDuplicateInjection(rho=0.25).apply(pools, hash_encoder, seed=42)
    assert [c.cand_id for c in a[0].candidates] == [c.cand_id for c in b[0].candidates]
    same = NearDuplicateInjection(rho=0.0).apply(pools, hash_encoder, seed=42)
    assert [c.cand_id for c in same[0].candidates] == [c.cand_id for c in pools[0].candidates]


def test_chunk_overlap_windows_inherit_identity(hash_encoder):
    pools = [make_pool(n_docs=5, sentences_per_doc=8)]
    out = OverlappingChunks(overlap=0.75, window_words=12).apply(pools, hash_encoder, seed=0)
    assert len(out[0].candidates) == 5
    for cand in out[0].candidates:
        assert cand.kind == "chunk" and len(cand.text.split()) <= 12
        assert cand.cand_id.split("#")[0] in cand.source_ids


@pytest.mark.parametrize("bad", [{"rho": -0.1}, {"gold_share": 2}])
def test_injection_rejects_bad_values(bad):
    with pytest.raises(ValueError):
        NearDuplicateInjection(**bad)


def test_copy_count_rounds_half_up():
    pool = make_pool(n_docs=10)
    for rho, expected in ((0.05, 1), (0.15, 2), (0.25, 3), (0.024, 0)):
        assert len(NearDuplicateInjection(rho=rho)._copies(pool, np.random.default_rng(0))) == expected
