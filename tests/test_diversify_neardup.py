"""Near-duplicate filter: loop reference, hand-worked skips, completion to k."""

from __future__ import annotations

import numpy as np
import pytest

from harness.diversify.neardup import NearDupDiversifier, near_duplicate_filter
from tests.helpers.reference import near_duplicate_loop
from tests.test_diversify_helpers import clustered_arrays, pool_from_arrays, unit


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("threshold", [0.5, 0.8, 0.95])
def test_neardup_matches_the_plain_loop(seed, threshold):
    embeddings, query = clustered_arrays(16, 6, seed, noise=0.15, ranked=seed % 2 == 0)
    relevance = (embeddings @ query).astype(np.float64)
    assert near_duplicate_filter(embeddings, relevance, 5, threshold).tolist() == near_duplicate_loop(
        embeddings, relevance, 5, threshold
    )


def test_neardup_hand_worked_example():
    # q = (1, 0, 0), so relevance is the first coordinate. Rank order: a 1, a' .96, b .6, b' .5, c .30.
    # <a, a'> = .96 and <b, b'> = .3 + .8 * .866 = .993 exceed .95; every other pair is below .6.
    a, a2 = [1.0, 0.0, 0.0], [0.96, 0.28, 0.0]
    b, b2 = [0.6, 0.0, 0.8], [0.5, 0.0, 0.866]
    c = [0.3, -0.9, 0.3]
    pool = pool_from_arrays(unit([a, a2, b, b2, c]), [1.0, 0.0, 0.0])
    assert NearDupDiversifier("neardup", 3).select_indices(pool).tolist() == [0, 2, 4]
    # k = 5 cannot be met without duplicates: the skipped ones return in kNN order.
    assert NearDupDiversifier("neardup", 5).select_indices(pool).tolist() == [0, 2, 4, 1, 3]
    # At threshold .97 the pair a, a' (cos .96) is no longer a duplicate.
    assert NearDupDiversifier("neardup", 3, threshold=0.97).select_indices(pool).tolist() == [0, 1, 2]


def test_neardup_with_all_copies_falls_back_to_knn():
    pool = pool_from_arrays(np.repeat(unit([[1.0, 0.5]]), 4, axis=0), [1.0, 0.0])
    assert NearDupDiversifier("neardup", 3).select_indices(pool).tolist() == [0, 1, 2]


def test_neardup_rejects_a_threshold_outside_cosine_range():
    with pytest.raises(ValueError, match="threshold must be a cosine"):
        NearDupDiversifier("neardup", 3, threshold=1.5)
