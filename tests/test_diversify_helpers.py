"""Pool builders shared by the diversifier tests, and tests of the shared tie and rank-order helpers."""

from __future__ import annotations

import math

import numpy as np
import pytest

from harness.core.types import Candidate, Document, Example, Pool
from harness.diversify.relevance import (
    fill_in_rank_order,
    knn_order,
    query_similarity,
    sigmoid,
)
from harness.diversify.ties import (
    argmax_stable,
    argmin_stable,
    ascending_order,
    descending_order,
)


def unit(rows) -> np.ndarray:
    rows = np.asarray(rows, dtype=np.float64)
    return (rows / np.linalg.norm(rows, axis=-1, keepdims=True)).astype(np.float32)


def pool_from_arrays(
    embeddings,
    query,
    source_ids=None,
    gold=(),
    hops: int = 1,
    scores=None,
    question_id: str = "q",
) -> Pool:
    """A Pool over the given rows, kept in the given order; candidate scores default to <q, e_i>."""
    embeddings = np.asarray(embeddings, dtype=np.float32)
    query = np.asarray(query, dtype=np.float32)
    m = embeddings.shape[0]
    source_ids = source_ids if source_ids is not None else [(f"d{i}",) for i in range(m)]
    scores = scores if scores is not None else embeddings @ query
    docs = tuple(Document(f"d{i}", f"Title {i}", (f"Sentence of document {i}.",)) for i in range(m))
    example = Example(question_id, "Which?", ("yes",), tuple(gold), docs, hops=hops)
    candidates = [Candidate(f"c{i}", f"text {i}", tuple(source_ids[i]), score=float(scores[i])) for i in range(m)]
    return Pool(example=example, candidates=candidates, embeddings=embeddings, query_embedding=query)


def clustered_arrays(m: int, d: int, seed: int, clusters: int = 3, noise: float = 0.35, ranked: bool = True):
    """Unit embeddings drawn around a few centres (so redundancy is real) and a query near one centre.

    ``ranked`` puts the rows in decreasing query similarity, as retrieval delivers them.
    """
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(clusters, d))
    rows = centres[rng.integers(clusters, size=m)] + noise * rng.normal(size=(m, d)) * np.sqrt(d / 8)
    embeddings = unit(rows)
    query = unit(centres[0] + 0.5 * rng.normal(size=d))
    if ranked:
        embeddings = embeddings[np.argsort(-(embeddings @ query), kind="stable")]
    return embeddings, query


def random_pool(m: int, d: int, seed: int, **kwargs) -> Pool:
    embeddings, query = clustered_arrays(m, d, seed, **kwargs)
    return pool_from_arrays(embeddings, query)


def test_argmax_and_argmin_pick_the_lowest_index_among_ties():
    values = np.array([0.1, 0.7, 0.3, 0.7, 0.1])
    assert argmax_stable(values) == 1
    assert argmin_stable(values) == 0
    assert argmax_stable(np.array([-np.inf, 2.0, 2.0])) == 1


def test_orders_keep_index_order_among_equal_values():
    values = np.array([0.5, 0.9, 0.5, 0.9, 0.1])
    assert descending_order(values).tolist() == [1, 3, 0, 2, 4]
    assert ascending_order(values).tolist() == [4, 0, 2, 1, 3]
    assert knn_order(values, 3).tolist() == [1, 3, 0]


def test_empty_or_2d_values_are_rejected():
    with pytest.raises(ValueError, match="non-empty 1-D"):
        argmax_stable(np.array([]))
    with pytest.raises(ValueError, match="non-empty 1-D"):
        argmin_stable(np.zeros((2, 2)))


def test_fill_in_rank_order_appends_the_most_relevant_unchosen():
    relevance = np.array([0.9, 0.2, 0.8, 0.8, 0.1])
    assert fill_in_rank_order([4], relevance, 3).tolist() == [4, 0, 2]
    assert fill_in_rank_order([1, 4], relevance, 9).tolist() == [1, 4, 0, 2, 3]  # capped at m = 5
    assert fill_in_rank_order([3, 1, 0], relevance, 2).tolist() == [3, 1]


def test_sigmoid_matches_the_logistic_function_and_stays_finite():
    logits = np.array([-1000.0, -2.0, 0.0, 3.0, 1000.0])
    expected = [0.0, 1 / (1 + math.e**2), 0.5, 1 / (1 + math.e**-3), 1.0]
    np.testing.assert_allclose(sigmoid(logits), expected, rtol=1e-12, atol=1e-300)


def test_query_similarity_is_the_knn_expression_and_rejects_nan():
    embeddings, query = clustered_arrays(6, 4, seed=0)
    pool = pool_from_arrays(embeddings, query)
    similarity = query_similarity(pool)
    assert similarity.dtype == np.float64
    np.testing.assert_array_equal(similarity, (pool.embeddings @ pool.query_embedding).astype(np.float64))
    embeddings[2, 0] = np.nan
    with pytest.raises(ValueError, match="candidate 2"):
        query_similarity(pool_from_arrays(embeddings, query))
