"""RNG-Score: loop reference, hand-worked scores, the kNN limits and the cross-encoder variant."""

from __future__ import annotations

import numpy as np
import pytest

from harness.diversify.knn import KNNDiversifier
from harness.diversify.reference import rng_loop, rng_scores_loop
from harness.diversify.relevance import sigmoid
from harness.diversify.rng import RNGDiversifier, rng_scores, rng_select
from tests.test_diversify_helpers import clustered_arrays, pool_from_arrays, random_pool

# q = (1, 0); a = (.8, .6), b = (.6, .8), c = (.6, -.8), d = (0, 1); relevance a .8, b .6, c .6, d 0.
HAND_EMBEDDINGS = [[0.8, 0.6], [0.6, 0.8], [0.6, -0.8], [0.0, 1.0]]
HAND_QUERY = [1.0, 0.0]


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("gamma", [-0.3, 0.0, 0.25, 1.0])
def test_rng_scores_and_selection_match_the_double_loop(seed, gamma):
    # Even seeds: rows in rank order (the triangular fast path); odd seeds: shuffled rows.
    embeddings, query = clustered_arrays(15, 6, seed, ranked=seed % 2 == 0)
    relevance = (embeddings @ query).astype(np.float64)
    np.testing.assert_allclose(
        rng_scores(embeddings @ embeddings.T, relevance, gamma),
        rng_scores_loop(embeddings, relevance, gamma),
        atol=1e-5,
    )
    assert rng_select(embeddings, relevance, 5, gamma).tolist() == rng_loop(embeddings, relevance, 5, gamma)


def test_rng_hand_worked_scores():
    pool = pool_from_arrays(HAND_EMBEDDINGS, HAND_QUERY)
    relevance = (pool.embeddings @ pool.query_embedding).astype(np.float64)
    gram = pool.embeddings @ pool.embeddings.T
    # gamma = 0: a: 1 - .8 = .2 (nothing outranks it)
    #            b: 1 - .6 + [.96 - .6]_+ = .76     (c ties with b, so it does not count: strict >)
    #            c: 1 - .6 + [0 - .6]_+ = .4
    #            d: 1 - 0 + [.6]_+ + [.8]_+ + [-.8]_+ = 2.4
    np.testing.assert_allclose(rng_scores(gram, relevance, 0.0), [0.2, 0.76, 0.4, 2.4], atol=1e-6)
    assert RNGDiversifier("rng", 2).select_indices(pool).tolist() == [0, 2]  # b is a near copy of a
    # gamma = -.5: b: .4 + [.96 - .6 - .5]_+ = .4, ties with c (.4): the lower index b wins, as in kNN.
    #              d: 1 + [.6 - .5]_+ + [.8 - .5]_+ + [-.8 - .5]_+ = 1.4
    np.testing.assert_allclose(rng_scores(gram, relevance, -0.5), [0.2, 0.4, 0.4, 1.4], atol=1e-6)
    assert RNGDiversifier("rng", 2, gamma=-0.5).select_indices(pool).tolist() == [0, 1]


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("gamma", [-2.0, -5.0, 1e6])
def test_rng_limits_equal_knn(seed, gamma):
    pool = random_pool(20, 8, seed)
    expected = KNNDiversifier("knn", 6).select_indices(pool).tolist()
    assert RNGDiversifier("rng", 6, gamma=gamma).select_indices(pool).tolist() == expected


def test_rng_at_minus_two_is_knn_even_with_cosines_rounded_past_one():
    # Exact duplicates: float32 cosines of a row with itself can round above 1.
    embeddings, query = clustered_arrays(10, 16, seed=4)
    embeddings = np.repeat(embeddings, 2, axis=0)
    pool = pool_from_arrays(embeddings, query)
    expected = KNNDiversifier("knn", 8).select_indices(pool).tolist()
    assert RNGDiversifier("rng", 8, gamma=-2.0).select_indices(pool).tolist() == expected


def test_rng_cross_encoder_relevance_uses_sigmoid_of_candidate_scores():
    embeddings, query = clustered_arrays(12, 6, seed=7)
    logits = np.random.default_rng(7).normal(scale=3.0, size=12)
    pool = pool_from_arrays(embeddings, query, scores=logits)
    rng = RNGDiversifier("rng_ce", 4, gamma=0.1, relevance="cross_encoder")
    expected = rng_loop(embeddings, sigmoid(logits), 4, 0.1)
    assert rng.select_indices(pool).tolist() == expected
    # An explicit array overrides the candidates' scores.
    other = np.random.default_rng(8).normal(size=12)
    assert rng.select_indices(pool, relevances=other).tolist() == rng_loop(embeddings, sigmoid(other), 4, 0.1)
    # Probabilities already in [0, 1] are used as they are.
    probabilities = sigmoid(logits)
    plain = RNGDiversifier("rng_ce", 4, gamma=0.1, relevance="cross_encoder", logits=False)
    assert plain.select_indices(pool, relevances=probabilities).tolist() == expected


def test_rng_rejects_bad_configuration():
    pool = random_pool(5, 4, seed=0)
    with pytest.raises(ValueError, match="relevance must be one of"):
        RNGDiversifier("rng", 3, relevance="bm25")
    with pytest.raises(ValueError, match="relevance='cross_encoder'"):
        RNGDiversifier("rng", 3).select_indices(pool, relevances=np.zeros(5))
    with pytest.raises(ValueError, match=r"must lie in \[0, 1\]"):
        plain = RNGDiversifier("rng", 3, relevance="cross_encoder", logits=False)
        plain.select_indices(pool, relevances=np.full(5, 2.0))
    with pytest.raises(ValueError, match="relevances for a pool of 5"):
        RNGDiversifier("rng", 3, relevance="cross_encoder").select_indices(pool, relevances=np.zeros(4))
