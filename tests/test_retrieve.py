import numpy as np

from harness.cache import ArrayStore, TextStore
from harness.core.types import Document, Example
from harness.retrieve.dense import DenseRetriever
from harness.retrieve.encoder import Encoder
from tests.conftest import compose_cfg


def examples():
    shared = Document("a::0", "Shared", ("The same paragraph appears in two questions.",))
    return [
        Example("a", "question one?", ("x",), ("a::0",), (shared, Document("a::1", "Other", ("Unrelated text.",)))),
        Example(
            "b",
            "question two?",
            ("y",),
            ("b::1",),
            (Document("b::0", "Shared", shared.sentences), Document("b::1", "Gold B", ("Gold text for b.",))),
        ),
    ]


def test_empty_store_is_truthy_and_persists(tmp_path):
    store = TextStore(tmp_path / "s.sqlite")
    assert store and len(store) == 0
    store.put_texts({"k": {"v": 1}})
    assert TextStore(tmp_path / "s.sqlite").get_texts(["k", "missing"]) == {"k": {"v": 1}}
    arrays = ArrayStore(tmp_path / "a.sqlite")
    arrays.put_arrays({"x": np.arange(3, dtype=np.float32)})
    np.testing.assert_array_equal(ArrayStore(tmp_path / "a.sqlite").get_arrays(["x"])["x"], [0, 1, 2])


def test_encoder_cache_computes_each_text_once_across_instances(tmp_path):
    first = Encoder(cache_dir=str(tmp_path))
    vectors = first.encode(["alpha beta", "gamma", "alpha beta"])
    assert first.calls == 2 and vectors.shape == (3, 384)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, rtol=1e-5)
    second = Encoder(cache_dir=str(tmp_path))
    np.testing.assert_array_equal(second.encode(["gamma", "alpha beta"]), vectors[[1, 0]])
    assert second.calls == 0 and second._model is None  # answered from disk, model never loaded


def test_encoder_memory_that_fills_up_still_answers_every_text(tmp_path, monkeypatch):
    from harness.retrieve import encoder as encoder_module

    monkeypatch.setattr(encoder_module, "MEMORY_ENTRIES", 2)
    encoder = Encoder(cache_dir=str(tmp_path))
    first = encoder.encode(["alpha beta", "gamma"])
    # "alpha beta" is remembered; "delta" fills the memory past its bound, which is cleared mid-call.
    again = encoder.encode(["alpha beta", "delta"])
    np.testing.assert_array_equal(again[0], first[0])
    assert again.shape == (2, 384) and len(encoder._memory) <= 2


def test_distractor_pools_rank_own_documents(hash_encoder):
    pools = DenseRetriever(hash_encoder, setting="distractor").retrieve(examples())
    for pool in pools:
        scores = [c.score for c in pool.candidates]
        assert scores == sorted(scores, reverse=True)
        assert {c.cand_id for c in pool.candidates} == {d.doc_id for d in pool.example.documents}
        np.testing.assert_allclose(pool.embeddings @ pool.query_embedding, scores, rtol=1e-5)


def test_open_setting_merges_duplicates_but_keeps_each_questions_ids(hash_encoder):
    pools = DenseRetriever(hash_encoder, setting="open", pool_size=10).retrieve(examples())
    assert len(pools[0].candidates) == 3  # the shared paragraph is indexed once
    assert "a::0" in {c.cand_id for c in pools[0].candidates}
    assert "b::0" in {c.cand_id for c in pools[1].candidates}  # question b sees its own id for it


class RecordingEncoder:
    """The hash encoder, remembering every document text and carrying the embed_title switch."""

    def __init__(self, embed_title: bool) -> None:
        from tests.conftest import HashEncoder

        self.inner, self.embed_title, self.documents = HashEncoder(), embed_title, []

    def encode_queries(self, texts):
        return self.inner.encode(texts)

    def encode_documents(self, texts):
        self.documents.extend(texts)
        return self.inner.encode(texts)


def test_embed_title_switches_the_embedded_text_everywhere():
    import pytest

    from harness.perturb.inject import NearDuplicateInjection

    for setting in ("distractor", "open"):
        with_title, text_only = RecordingEncoder(True), RecordingEncoder(False)
        titled = DenseRetriever(with_title, setting=setting, pool_size=10).retrieve(examples())
        plain = DenseRetriever(text_only, setting=setting, pool_size=10, embed_title=False).retrieve(examples())
        assert "Gold B: Gold text for b." in with_title.documents
        assert "Gold text for b." in text_only.documents and not any(": " in t for t in text_only.documents)
        # different texts, so different vectors (and different embedding-cache keys)
        assert not np.allclose(titled[1].embeddings, plain[1].embeddings)
        # injected copies are embedded the way their sources were
        before = len(text_only.documents)
        NearDuplicateInjection(rho=1.0).apply(plain, text_only, seed=0)
        copies = text_only.documents[before:]
        assert copies and not any(": " in t for t in copies)
    with pytest.raises(ValueError, match="retriever.embed_title"):
        DenseRetriever(RecordingEncoder(True), embed_title=False)


def test_embed_title_config_defaults_to_true_and_reaches_the_encoder(tmp_path):
    from hydra.utils import instantiate

    for overrides, expected in (
        ([], True),
        (["retriever.embed_title=false"], False),
        (["retriever=bge_small_320", "retriever.embed_title=false"], False),
    ):
        cfg = compose_cfg(overrides)
        assert cfg.retriever.embed_title is expected and cfg.retriever.encoder.embed_title is expected
        encoder = instantiate(cfg.retriever.encoder, cache_dir=str(tmp_path))  # the model loads lazily
        assert encoder.embed_title is expected
        assert (
            instantiate({k: v for k, v in cfg.retriever.items() if k != "encoder"}, encoder=encoder).embed_title
            is expected
        )
