"""retriever=bm25 agrees with an independent BM25, rank-bm25, on real pools: the HotpotQA distractor pools
(an index per question over its ten paragraphs) and the shared fullwiki sample as an open corpus (one index
over every question's paragraphs, deduplicated). Both are given the same token lists (the harness's
tokenizer), k1 and b; each pool's scores must equal rank-bm25's for the same documents, and its order must be
rank-bm25's (non-increasing reference scores, and in the open setting the best ``pool_size`` of the corpus).

Which bm25s variant each rank-bm25 class computes, and why they must agree (Kamphuis et al., 2020, give the
bm25s forms; rank-bm25's are in its source):

- ``bm25+`` and ``BM25Plus``: both take idf ``log((N + 1) / n)`` and add ``idf * (delta + tf (k1 + 1) /
  (k1 (1 - b + b dl / avgdl) + tf))`` for every query token, the delta also where the token is absent (bm25s
  through its non-occurrence array). Equal scores.
- ``robertson`` and ``BM25Okapi(epsilon=0)``: idf ``log((N - n + 0.5) / (n + 0.5))``, negative values
  floored at 0 (bm25s clamps the ratio at 1; rank-bm25 puts ``epsilon * mean idf`` in their place, 0 here).
  bm25s leaves out the factor ``k1 + 1`` of the term-frequency part, a constant: its scores times ``k1 + 1``
  are rank-bm25's, and the rankings are the same.
- ``lucene`` (the default) and ``BM25Okapi`` with Lucene's idf ``log(1 + (N - n + 0.5) / (n + 0.5))``: rank-bm25
  has no Lucene class; its Okapi class with that idf (the one line ``_calc_idf``) is Lucene's BM25 times
  ``k1 + 1``, for the same reason as above.

(rank-bm25's ``BM25L`` is not a reference: it multiplies its term by the raw frequency once more than the
BM25L of Lv and Zhai and of bm25s.)
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from rank_bm25 import BM25Okapi, BM25Plus

from harness.core.types import Example, Pool
from harness.data.loader import load_examples
from harness.retrieve.bm25 import BM25Settings, tokenize
from harness.retrieve.corpus import document_text, open_corpus
from harness.retrieve.sparse import SparseRetriever
from tests.conftest import SHARED_DATA, HashEncoder

DISTRACTOR = SHARED_DATA / "hotpotqa" / "hotpot_dev_distractor_v1_100.json"
FULLWIKI = SHARED_DATA / "hotpotqa_fullwiki" / "hotpot_fullwiki_dev_sample.jsonl"
pytestmark = pytest.mark.skipif(not FULLWIKI.is_file() or not DISTRACTOR.is_file(), reason="shared data missing")


class LuceneIdfOkapi(BM25Okapi):
    """rank-bm25's Okapi BM25 with Lucene's idf (never negative, so no floor)."""

    def _calc_idf(self, nd):
        for word, freq in nd.items():
            self.idf[word] = math.log(1 + (self.corpus_size - freq + 0.5) / (freq + 0.5))


def reference(variant: str, tokens: list[list[str]], k1: float, b: float, delta: float):
    """rank-bm25's model for ``variant`` and its score over the bm25s score (1, or the constant k1 + 1)."""
    if variant == "bm25+":
        return BM25Plus(tokens, k1=k1, b=b, delta=delta), 1.0
    if variant == "robertson":
        return BM25Okapi(tokens, k1=k1, b=b, epsilon=0.0), k1 + 1
    assert variant == "lucene"
    return LuceneIdfOkapi(tokens, k1=k1, b=b), k1 + 1


# (variant, k1, b): the default setting, and others away from every default.
CASES = [("lucene", 1.5, 0.75), ("lucene", 0.9, 0.4), ("robertson", 1.2, 0.75), ("bm25+", 1.2, 0.3)]


def settings_node(variant: str, k1: float, b: float) -> dict:
    return {
        "variant": variant, "k1": k1, "b": b, "delta": 1.0,
        "tokenizer": "sklearn", "stopwords": "en", "stemmer": "english",
    }  # fmt: skip


def assert_pool_agrees(pool: Pool, positions: list[int], expected: np.ndarray, where: str) -> None:
    """The pool's scores are ``expected`` at its documents' ``positions``, in non-increasing order."""
    scores = np.array([c.score for c in pool.candidates])
    np.testing.assert_allclose(scores, expected[positions], rtol=1e-9, atol=1e-9, err_msg=where)
    steps = np.diff(expected[positions])
    assert np.all(steps <= 1e-9), f"{where}: pool order is not rank-bm25's ({expected[positions]})"


@pytest.fixture(scope="module")
def distractor() -> list[Example]:
    return load_examples(DISTRACTOR, "hotpotqa", setting="distractor")


@pytest.fixture(scope="module")
def fullwiki() -> list[Example]:
    return load_examples(FULLWIKI, "hotpotqa", setting="fullwiki")


@pytest.mark.parametrize("variant,k1,b", CASES)
def test_distractor_pools_score_and_rank_as_rank_bm25(distractor, variant, k1, b):
    node = settings_node(variant, k1, b)
    settings = BM25Settings.of(node)
    pools = SparseRetriever(HashEncoder(), setting="distractor", bm25=node).retrieve(distractor)
    assert len(pools) == len(distractor) == 103
    for ex, pool in zip(distractor, pools, strict=True):
        tokens = tokenize(settings, [document_text(doc) for doc in ex.documents])
        model, factor = reference(variant, tokens, k1, b, 1.0)
        expected = model.get_scores(tokenize(settings, [ex.question])[0]) / factor
        index = {doc.doc_id: i for i, doc in enumerate(ex.documents)}
        assert len(pool.candidates) == len(ex.documents)
        assert_pool_agrees(pool, [index[c.cand_id] for c in pool.candidates], expected, ex.question_id)


@pytest.mark.parametrize("variant,k1,b", CASES[:1] + CASES[2:])
def test_open_fullwiki_pools_score_and_rank_as_rank_bm25(fullwiki, variant, k1, b):
    node = settings_node(variant, k1, b)
    settings = BM25Settings.of(node)
    pools = SparseRetriever(HashEncoder(), setting="open", pool_size=20, bm25=node).retrieve(fullwiki)
    corpus = open_corpus(fullwiki)
    model, factor = reference(variant, tokenize(settings, [document_text(d) for d in corpus.documents]), k1, b, 1.0)
    position = {(doc.title, doc.text): i for i, doc in enumerate(corpus.documents)}
    assert len(corpus) > 2000  # every question's paragraphs, shared ones once
    queries = tokenize(settings, [ex.question for ex in fullwiki])
    for ex, pool, query in zip(fullwiki, pools, queries, strict=True):
        expected = model.get_scores(query) / factor
        positions = [position[(c.title, c.text)] for c in pool.candidates]
        assert len(positions) == 20
        assert_pool_agrees(pool, positions, expected, ex.question_id)
        # No document left out of the pool scores above the last one kept.
        outside = np.delete(expected, positions)
        assert outside.max() <= expected[positions[-1]] + 1e-9, ex.question_id
