"""Greedy Vendi selector: loop reference, relevance blend limits, hand-worked picks."""

from __future__ import annotations

import numpy as np
import pytest

from harness.diversify.knn import KNNDiversifier
from harness.diversify.vendi import VendiDiversifier, vendi_greedy_select
from tests.helpers.reference import vendi_greedy_loop
from tests.test_diversify_helpers import (
    clustered_arrays,
    pool_from_arrays,
    random_pool,
    unit,
)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("lambda_", [0.0, 0.5])
def test_vendi_selector_matches_the_plain_loop(seed, lambda_):
    embeddings, query = clustered_arrays(12, 6, seed, ranked=seed % 2 == 0)
    relevance = (embeddings @ query).astype(np.float64)
    assert vendi_greedy_select(embeddings, relevance, 5, lambda_).tolist() == vendi_greedy_loop(
        embeddings, relevance, 5, lambda_
    )


@pytest.mark.parametrize("seed", range(4))
def test_vendi_selector_at_lambda_one_is_knn(seed):
    pool = random_pool(15, 6, seed)
    assert (
        VendiDiversifier("vendi", 5, lambda_=1.0).select_indices(pool).tolist()
        == KNNDiversifier("knn", 5).select_indices(pool).tolist()
    )


def test_vendi_selector_hand_worked_example():
    # Seed a (most relevant). Adding a copy of a leaves Vendi at 1; adding an orthogonal vector gives
    # K = I, eigenvalues of K/2 = (.5, .5), Vendi = exp(ln 2) = 2: the orthogonal c is taken over a'.
    a = [1.0, 0.0, 0.0]
    pool = pool_from_arrays(unit([a, a, [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]]), unit([1.0, 0.3, 0.2]))
    assert VendiDiversifier("vendi", 3).select_indices(pool).tolist() == [0, 2, 3]
