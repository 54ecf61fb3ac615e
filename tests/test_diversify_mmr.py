"""MMR and max-min: plain-loop references, the kNN limit, hand-worked picks and tie rules."""

from __future__ import annotations

import numpy as np
import pytest

from harness.diversify.knn import KNNDiversifier
from harness.diversify.maxmin import MaxMinDiversifier, maxmin_select
from harness.diversify.mmr import MMRDiversifier, mmr_select
from harness.diversify.relevance import query_similarity
from tests.helpers.reference import maxmin_loop, mmr_loop
from tests.test_diversify_helpers import (
    clustered_arrays,
    pool_from_arrays,
    random_pool,
    unit,
)

# q = (1, 0); a = (.8, .6), b = (.6, .8), c = (.6, -.8), d = (0, 1).
# Relevance: a .8, b .6, c .6, d 0.  Cosines: <a,b> = .96, <a,c> = 0, <a,d> = .6, <b,c> = -.28, <b,d> = .8, <c,d> = -.8.
HAND_EMBEDDINGS = [[0.8, 0.6], [0.6, 0.8], [0.6, -0.8], [0.0, 1.0]]
HAND_QUERY = [1.0, 0.0]


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("lambda_", [0.0, 0.3, 0.5, 0.8, 1.0])
def test_mmr_matches_the_plain_loop(seed, lambda_):
    embeddings, query = clustered_arrays(12, 6, seed, ranked=seed % 2 == 0)
    relevance = (embeddings @ query).astype(np.float64)
    expected = mmr_loop(embeddings, relevance, 5, lambda_)
    assert mmr_select(embeddings, relevance, 5, lambda_).tolist() == expected


@pytest.mark.parametrize("seed", range(6))
def test_mmr_at_lambda_one_is_knn(seed):
    pool = random_pool(15, 8, seed)
    knn = KNNDiversifier("knn", 5).select_indices(pool).tolist()
    assert MMRDiversifier("mmr", 5, lambda_=1.0).select_indices(pool).tolist() == knn


def test_mmr_at_lambda_one_is_knn_with_tied_scores():
    # Rows 1 and 3 are the same vector (equal scores): kNN keeps the lower pool index first.
    embeddings = unit([[1, 0.1, 0], [0.7, 0.7, 0.1], [0.2, 1, 0], [0.7, 0.7, 0.1], [0, 0.2, 1]])
    pool = pool_from_arrays(embeddings, unit([1, 0.3, 0]))
    knn = KNNDiversifier("knn", 4).select_indices(pool).tolist()
    assert MMRDiversifier("mmr", 4, lambda_=1.0).select_indices(pool).tolist() == knn
    assert knn.index(1) < knn.index(3)


def test_mmr_hand_worked_example():
    pool = pool_from_arrays(HAND_EMBEDDINGS, HAND_QUERY)
    # Step 1: a (most relevant). Step 2 at lambda = .5: b -> .5*.6 - .5*.96 = -.18, c -> .5*.6 - .5*0 = .30,
    # d -> .5*0 - .5*.6 = -.30, so c. Step 3: b -> .3 - .5*max(.96, -.28) = -.18, d -> 0 - .5*max(.6, -.8) = -.30, so b.
    assert MMRDiversifier("mmr", 3, lambda_=0.5).select_indices(pool).tolist() == [0, 2, 1]
    # kNN order is a, b, c (b and c tie at .6; the lower index wins).
    assert MMRDiversifier("mmr", 3, lambda_=1.0).select_indices(pool).tolist() == [0, 1, 2]


def test_mmr_returns_the_whole_pool_when_k_exceeds_it_and_rejects_bad_lambda():
    pool = random_pool(4, 5, seed=3)
    assert sorted(MMRDiversifier("mmr", 10).select_indices(pool).tolist()) == [0, 1, 2, 3]
    with pytest.raises(ValueError, match="lambda_ must lie in"):
        MMRDiversifier("mmr", 3, lambda_=1.5)


@pytest.mark.parametrize("seed", range(8))
def test_maxmin_matches_the_plain_loop(seed):
    embeddings, query = clustered_arrays(14, 5, seed, ranked=seed % 2 == 1)
    relevance = (embeddings @ query).astype(np.float64)
    assert maxmin_select(embeddings, relevance, 6).tolist() == maxmin_loop(embeddings, relevance, 6)


def test_maxmin_hand_worked_example():
    pool = pool_from_arrays(HAND_EMBEDDINGS, HAND_QUERY)
    # Seed a; distances to a: b .04, c 1, d .4 -> c. Min distances to {a, c}: b min(.04, 1.28) = .04,
    # d min(.4, 1.8) = .4 -> d. Then b.
    assert MaxMinDiversifier("maxmin", 4).select_indices(pool).tolist() == [0, 2, 3, 1]


def test_maxmin_breaks_distance_ties_by_pool_index():
    # Rows 1 and 2 are copies at distance 1 from the seed (row 0): the lower pool index is taken. Then
    # row 2 sits at distance 0 from row 1 while row 3 keeps a small positive distance, so row 3 follows.
    embeddings = unit([[1, 0, 0], [0, 1, 0], [0, 1, 0], [0.9, 0.1, 0]])
    pool = pool_from_arrays(embeddings, [1.0, 0.0, 0.0])
    assert query_similarity(pool).argmax() == 0
    assert MaxMinDiversifier("maxmin", 3).select_indices(pool).tolist() == [0, 1, 3]
