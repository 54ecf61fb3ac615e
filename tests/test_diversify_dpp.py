"""Greedy DPP MAP: brute-force log-det greedy, early stop with kNN completion, relevance floor."""

from __future__ import annotations

import numpy as np
import pytest

from harness.diversify.dpp import DPPDiversifier, dpp_greedy_map
from harness.diversify.knn import KNNDiversifier
from tests.helpers.reference import dpp_brute_force
from tests.test_diversify_helpers import clustered_arrays, pool_from_arrays, unit


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("k", [1, 3, 6])
def test_dpp_matches_brute_force_greedy_log_det(seed, k):
    embeddings, query = clustered_arrays(12, 8, seed, ranked=seed % 2 == 0)
    relevance = (embeddings @ query).astype(np.float64)
    indices, n_greedy = dpp_greedy_map(embeddings, relevance, k)
    assert indices.tolist() == dpp_brute_force(embeddings, relevance, k)
    assert n_greedy == k


def test_dpp_first_pick_is_the_most_relevant():
    embeddings, query = clustered_arrays(20, 6, seed=11, ranked=False)
    relevance = (embeddings @ query).astype(np.float64)
    indices, _ = dpp_greedy_map(embeddings, relevance, 4)
    assert indices[0] == int(np.argmax(relevance))


@pytest.mark.parametrize("seed", range(4))
def test_dpp_stops_at_the_rank_and_fills_in_knn_order(seed):
    # Eight items in 3 dimensions: after 3 greedy picks every residual d_i^2 is numerically zero.
    rng = np.random.default_rng(seed)
    embeddings = unit(rng.normal(size=(8, 3)))
    query = unit(rng.normal(size=3) + 2.0 * embeddings.mean(axis=0))
    pool = pool_from_arrays(embeddings, query)
    relevance = (pool.embeddings @ pool.query_embedding).astype(np.float64)
    indices, n_greedy = dpp_greedy_map(pool.embeddings, relevance, 5)
    assert n_greedy == 3
    assert indices.tolist() == dpp_brute_force(pool.embeddings, relevance, 5)
    knn = KNNDiversifier("knn", 8).select_indices(pool).tolist()
    assert indices[3:].tolist() == [i for i in knn if i not in indices[:3]][:2]
    assert len(set(indices.tolist())) == 5


def test_dpp_hand_worked_two_orthogonal_and_one_duplicate():
    # q = (1, 0, 0). a = (.8, .6, 0), b = a (duplicate), c = (.6, 0, .8).
    # Quality q_i = s_i + .001: a, b 0.801, c 0.601. Step 1: L_aa = .801^2 (a before b by index).
    # Step 2: d_b^2 = 0 (b is a's copy) but d_c^2 = .601^2 (1 - <a,c>^2) = .361201 * (1 - .2304) > 0, so c.
    # Step 3: b's residual is 0 <= 1e-10, so the greedy phase stops and b is appended in kNN order.
    embeddings = unit([[0.8, 0.6, 0], [0.8, 0.6, 0], [0.6, 0, 0.8]])
    relevance = (embeddings @ np.array([1, 0, 0], dtype=np.float32)).astype(np.float64)
    indices, n_greedy = dpp_greedy_map(embeddings, relevance, 3)
    assert indices.tolist() == [0, 2, 1] and n_greedy == 2


def test_dpp_relevance_floor_keeps_negatively_relevant_items_selectable():
    # Two relevant items and two with negative similarity to the query; k = 4 needs all four.
    embeddings = unit([[1, 0.1, 0, 0], [0.9, 0, 0.3, 0], [-1, 0, 0, 0.2], [-0.5, 0.5, 0, -0.7]])
    relevance = (embeddings @ np.array([1, 0, 0, 0], dtype=np.float32)).astype(np.float64)
    indices, n_greedy = dpp_greedy_map(embeddings, relevance, 4)
    assert n_greedy == 4  # floor^2 = 1e-6 > 1e-10: diversity still orders the zero-quality items
    assert indices.tolist() == dpp_brute_force(embeddings, relevance, 4)
    indices, n_greedy = dpp_greedy_map(embeddings, relevance, 4, relevance_floor=1e-6)
    assert n_greedy == 2  # floor^2 = 1e-12 <= 1e-10: they are treated as degenerate and filled in kNN order
    assert indices.tolist() == [0, 1, 3, 2]


def test_dpp_diversifier_wraps_the_kernel_and_validates():
    embeddings, query = clustered_arrays(10, 5, seed=2)
    pool = pool_from_arrays(embeddings, query)
    relevance = (pool.embeddings @ pool.query_embedding).astype(np.float64)
    expected = dpp_greedy_map(pool.embeddings, relevance, 4)[0].tolist()
    assert DPPDiversifier("dpp", 4).select_indices(pool).tolist() == expected
    assert len(DPPDiversifier("dpp", 50).select_indices(pool)) == 10
    with pytest.raises(ValueError, match="relevance_floor"):
        DPPDiversifier("dpp", 3, relevance_floor=0.0)
