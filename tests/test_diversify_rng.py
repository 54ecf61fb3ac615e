"""RNG-Score: loop reference, hand-worked scores, the kNN limits, the cross-encoder variant, and the
prefix shortcut of ``rng_select`` against the whole-Gram computation (ties included)."""

from __future__ import annotations

import numpy as np
import pytest

from harness.diversify import rng as rng_module
from harness.diversify.knn import KNNDiversifier
from harness.diversify.relevance import sigmoid
from harness.diversify.rng import (
    RNGDiversifier,
    _prefix_scores,
    rng_scores,
    rng_select,
    rng_select_full,
)
from harness.diversify.ties import ascending_order
from tests.helpers.reference import rng_loop, rng_scores_loop
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


# --- The prefix shortcut of rng_select against the whole-Gram computation ---------------------------


def full_gram_selection(embeddings, relevance, k, gamma):
    """The selection from every candidate's score, computed from the whole Gram matrix."""
    scores = rng_scores(embeddings @ embeddings.T, relevance, gamma)
    return ascending_order(scores)[: min(k, len(relevance))].tolist()


def random_selection_case(rng: np.random.Generator):
    """A random pool with the awkward cases mixed in: any size 1..120, clusters of near copies,
    exact duplicate rows, deliberately repeated (and rounded) relevances, shuffled pool order."""
    m = int(rng.integers(1, 121))
    d = int(rng.choice([3, 8, 32]))
    clusters = int(rng.integers(1, 7))
    centres = rng.normal(size=(clusters, d))
    rows = centres[rng.integers(clusters, size=m)] + rng.uniform(0.1, 1.5) * rng.normal(size=(m, d))
    embeddings = rows / np.linalg.norm(rows, axis=1, keepdims=True)
    query = centres[0] + rng.uniform(0.2, 1.5) * rng.normal(size=d)
    query /= np.linalg.norm(query)
    dtype = np.float64 if rng.random() < 0.2 else np.float32
    embeddings = embeddings.astype(dtype)
    relevance = np.asarray(embeddings @ query.astype(dtype), dtype=np.float64)
    if rng.random() < 0.3:
        embeddings[rng.integers(m, size=m // 3)] = embeddings[rng.integers(m, size=m // 3)]
    if rng.random() < 0.6:  # equal relevances: copied from other candidates, or rounded
        copies = int(rng.integers(0, m + 1))
        relevance[rng.integers(m, size=copies)] = relevance[rng.integers(m, size=copies)]
        if rng.random() < 0.5:
            relevance = np.round(relevance, 1)
    if rng.random() < 0.5:  # rank order, as retrieval delivers pools
        order = np.argsort(-relevance, kind="stable")
        embeddings, relevance = np.ascontiguousarray(embeddings[order]), relevance[order]
    return embeddings, relevance


GAMMAS = [-2.0, -0.3, 0.0, 0.1, 1.0, 1e6]


@pytest.mark.parametrize("first_prefix", [2, 24])  # 2: the shortcut engages on small pools too
@pytest.mark.parametrize("gamma", GAMMAS)
def test_rng_select_equals_the_full_gram_selection(monkeypatch, first_prefix, gamma):
    monkeypatch.setattr(rng_module, "FIRST_PREFIX", first_prefix)
    rng = np.random.default_rng(100 * first_prefix + GAMMAS.index(gamma))
    for _ in range(60):
        embeddings, relevance = random_selection_case(rng)
        k = int(rng.choice([1, 2, 5, 12, 200]))
        expected = full_gram_selection(embeddings, relevance, k, gamma)
        assert rng_select(embeddings, relevance, k, gamma).tolist() == expected
        assert rng_select_full(embeddings, relevance, k, gamma).tolist() == expected


@pytest.mark.parametrize("seed", range(4))
def test_prefix_scores_are_the_full_scores_bit_for_bit(seed):
    rng = np.random.default_rng(seed)
    for _ in range(25):
        embeddings, relevance = random_selection_case(rng)
        gamma = float(rng.choice([-2.0, 0.0, 0.1, 1e6]))
        full = rng_scores(embeddings @ embeddings.T, relevance, gamma)
        ranked = None if np.all(relevance[:-1] >= relevance[1:]) else np.argsort(-relevance, kind="stable")
        for size in range(2, len(relevance) + 1, 7):
            scores = _prefix_scores(embeddings, relevance, ranked, size, gamma)
            top = np.arange(size) if ranked is None else ranked[:size]
            np.testing.assert_array_equal(scores[top], full[top])
            assert np.all(np.isinf(np.delete(scores, top)))


def forbid_full_gram(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("the shortcut should have settled the selection")

    monkeypatch.setattr(rng_module, "rng_select_full", refuse)


def record_prefix_sizes(monkeypatch) -> list[int]:
    sizes: list[int] = []
    score_prefix = rng_module._prefix_scores

    def recording(embeddings, relevance, ranked, size, gamma):
        sizes.append(size)
        return score_prefix(embeddings, relevance, ranked, size, gamma)

    monkeypatch.setattr(rng_module, "_prefix_scores", recording)
    return sizes


def clustered_case(seed: int):
    """A ranked pool of 100 like the benchmark's: a handful of topics, the query near one of them."""
    embeddings, query = clustered_arrays(100, 256, seed, clusters=6, noise=0.6 / np.sqrt(256 / 8))
    return embeddings, (embeddings @ query).astype(np.float64)


@pytest.mark.parametrize("seed", range(4))
def test_shortcut_settles_clustered_pools_from_one_prefix(monkeypatch, seed):
    embeddings, relevance = clustered_case(seed)
    expected = full_gram_selection(embeddings, relevance, 5, 0.0)
    shuffle = np.random.default_rng(seed).permutation(100)
    expected_shuffled = [int(np.flatnonzero(shuffle == i)[0]) for i in expected]
    forbid_full_gram(monkeypatch)
    sizes = record_prefix_sizes(monkeypatch)
    assert rng_select(embeddings, relevance, 5, 0.0).tolist() == expected
    # The same pool in another order: sorted internally, indices mapped back.
    assert rng_select(embeddings[shuffle], relevance[shuffle], 5, 0.0).tolist() == expected_shuffled
    assert sizes == [rng_module.FIRST_PREFIX] * 2


@pytest.mark.parametrize("seed", range(4))
def test_second_prefix_sized_from_the_first_settles_the_selection(monkeypatch, seed):
    # A first prefix of 2k = 10 is too short at gamma = .1; the k-th best score it finds bounds the
    # final one from above, which fixes a second prefix that is sure to settle the selection.
    embeddings, relevance = clustered_case(seed)
    expected = full_gram_selection(embeddings, relevance, 5, 0.1)
    monkeypatch.setattr(rng_module, "FIRST_PREFIX", 2)
    forbid_full_gram(monkeypatch)
    sizes = record_prefix_sizes(monkeypatch)
    assert rng_select(embeddings, relevance, 5, 0.1).tolist() == expected
    assert len(sizes) == 2 and 10 == sizes[0] < sizes[1] <= 75


# A: r .75; B: r .625, occluded by A with a hinge of .75 - .625 = .125, so its score is exactly
# .375 + .125 = .5; C, D: near copies of A, scores far above .5; L: r .5, orthogonal to all of
# them, score exactly 1 - .5 = .5, tying with B; N: r just below .5, but 1 - r rounds to .5, so
# it ties too; fillers F with r 0. Every other value is dyadic, so the float arithmetic is exact.
TIE_ROWS = {
    "A": ([1.0, 0.0, 0.0, 0.0], 0.75),
    "B": ([0.75, 0.5, 0.0, 0.0], 0.625),
    "C": ([1.0, 0.0, 0.0, 0.0], 0.5625),
    "D": ([1.0, 0.0, 0.0, 0.0], 0.53125),
    "L": ([0.0, 0.0, 1.0, 0.0], 0.5),
    "N": ([0.0, 0.0, 0.0, 1.0], float(np.nextafter(0.5, 0.0))),
    "F": ([0.0, 1.0, 0.0, 0.0], 0.0),
}


def tie_case(names):
    embeddings = np.array([TIE_ROWS[n][0] for n in names], dtype=np.float32)
    relevance = np.array([TIE_ROWS[n][1] for n in names])
    return embeddings, relevance


def test_shortcut_keeps_going_when_a_left_out_candidate_could_win_a_tie(monkeypatch):
    # Prefix of 4 (A, B, C, D): B's score .5 equals L's floor 1 - .5, and L has the lower pool
    # index, so L beats B in the full computation; stopping on the tie would wrongly keep B.
    monkeypatch.setattr(rng_module, "FIRST_PREFIX", 4)
    embeddings, relevance = tie_case(["L", "A", "B", "C", "D", "F", "F", "F"])
    np.testing.assert_array_equal(rng_scores(embeddings @ embeddings.T, relevance)[:3], [0.5, 0.25, 0.5])
    assert full_gram_selection(embeddings, relevance, 2, 0.0) == [1, 0]
    assert rng_select(embeddings, relevance, 2, 0.0).tolist() == [1, 0]


def test_tie_check_looks_at_every_left_out_candidate_not_just_the_most_relevant(monkeypatch):
    # The most relevant left-out candidate L comes after B in the pool, but the less relevant N,
    # whose floor rounds to the same .5, comes first, so N beats B.
    monkeypatch.setattr(rng_module, "FIRST_PREFIX", 4)
    embeddings, relevance = tie_case(["N", "A", "B", "C", "D", "L", "F", "F"])
    assert 1.0 - relevance[0] == 0.5 and relevance[0] < 0.5
    assert full_gram_selection(embeddings, relevance, 2, 0.0) == [1, 0]
    assert rng_select(embeddings, relevance, 2, 0.0).tolist() == [1, 0]


def test_shortcut_stops_on_a_tie_the_selected_candidate_wins(monkeypatch):
    # Rank order: L comes after B in the pool, so B wins the tie and the prefix of 4 settles it.
    monkeypatch.setattr(rng_module, "FIRST_PREFIX", 4)
    embeddings, relevance = tie_case(["A", "B", "C", "D", "L", "F", "F", "F"])
    assert full_gram_selection(embeddings, relevance, 2, 0.0) == [0, 1]
    forbid_full_gram(monkeypatch)
    assert rng_select(embeddings, relevance, 2, 0.0).tolist() == [0, 1]


def test_cross_encoder_pool_out_of_relevance_order_uses_the_shortcut_exactly(monkeypatch):
    # Cross-encoder relevances do not follow the pool's (retrieval) order, so the pool is sorted
    # internally; the selection must still be the full computation's, in pool indices.
    embeddings, query = clustered_arrays(100, 64, seed=11, clusters=6)
    logits = 4.0 * (embeddings @ query) + np.random.default_rng(11).normal(scale=0.5, size=100)
    pool = pool_from_arrays(embeddings, query, scores=logits)
    diversifier = RNGDiversifier("rng_ce", 5, gamma=0.1, relevance="cross_encoder")
    expected = full_gram_selection(pool.embeddings, sigmoid(logits), 5, 0.1)
    assert diversifier.select_indices(pool).tolist() == expected
