"""Max-min (farthest-point) diversification.

Seeded with the most relevant candidate; every later step takes the candidate whose minimum
cosine distance 1 - <e_i, e_j> to the selected set is largest. Relevance plays no further part,
which makes this the pure-dispersion end of the spectrum that MMR interpolates.
"""

from __future__ import annotations

import numpy as np

from harness.diversify.base import EmbeddingDiversifier
from harness.diversify.relevance import check_selection_inputs
from harness.diversify.ties import argmax_stable


def maxmin_select(embeddings: np.ndarray, relevance: np.ndarray, k: int) -> np.ndarray:
    """Indices of min(k, m) items in farthest-point order, starting from the most relevant."""
    k_eff = check_selection_inputs(embeddings, relevance, k)
    chosen = np.empty(k_eff, dtype=np.intp)
    chosen[0] = argmax_stable(relevance)
    if k_eff == 1:
        return chosen
    available = np.ones(relevance.shape[0], dtype=bool)
    available[chosen[0]] = False
    min_distance = 1.0 - np.asarray(embeddings @ embeddings[chosen[0]], dtype=np.float64)
    for step in range(1, k_eff):
        pick = argmax_stable(np.where(available, min_distance, -np.inf))
        chosen[step] = pick
        available[pick] = False
        if step + 1 < k_eff:
            distance = 1.0 - np.asarray(embeddings @ embeddings[pick], dtype=np.float64)
            np.minimum(min_distance, distance, out=min_distance)
    return chosen


class MaxMinDiversifier(EmbeddingDiversifier):
    def choose(self, embeddings: np.ndarray, relevance: np.ndarray) -> np.ndarray:
        return maxmin_select(embeddings, relevance, self.k)
