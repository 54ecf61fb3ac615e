"""Near-duplicate filter: kNN with redundant copies skipped.

Walks the candidates in kNN order and keeps one unless its cosine to an already kept candidate
exceeds ``threshold`` (0.95 by default, the threshold of the pool-redundancy diagnostic). If the
walk ends with fewer than k kept, the skipped candidates fill the remaining places in kNN order,
so exactly min(k, m) indices come back.
"""

from __future__ import annotations

import numpy as np

from harness.diversify.base import EmbeddingDiversifier
from harness.diversify.relevance import check_selection_inputs, fill_in_rank_order
from harness.diversify.ties import descending_order

DEFAULT_THRESHOLD = 0.95


def near_duplicate_filter(
    embeddings: np.ndarray, relevance: np.ndarray, k: int, threshold: float = DEFAULT_THRESHOLD
) -> np.ndarray:
    """Indices of min(k, m) items: kNN order minus near-duplicates of kept items, then the skipped ones."""
    k_eff = check_selection_inputs(embeddings, relevance, k)
    order = descending_order(relevance)
    # Largest cosine of every candidate to the kept set; only grows, so a skipped candidate stays skipped.
    max_similarity = np.full(relevance.shape[0], -np.inf)
    kept: list[int] = []
    position = 0  # next place in kNN order still to be examined
    while len(kept) < k_eff and position < order.size:
        admissible = max_similarity[order[position:]] <= threshold
        if not admissible.any():
            break
        position += int(np.argmax(admissible))
        pick = int(order[position])
        kept.append(pick)
        position += 1
        np.maximum(max_similarity, embeddings @ embeddings[pick], out=max_similarity)
    return fill_in_rank_order(kept, relevance, k_eff)


class NearDupDiversifier(EmbeddingDiversifier):
    shown_settings = ("threshold",)

    def __init__(self, name: str, k: int, threshold: float = DEFAULT_THRESHOLD) -> None:
        super().__init__(name, k)
        if not -1.0 <= threshold <= 1.0:
            raise ValueError(f"diversifier {name!r}: threshold must be a cosine in [-1, 1], got {threshold}")
        self.threshold = float(threshold)

    def choose(self, embeddings: np.ndarray, relevance: np.ndarray) -> np.ndarray:
        return near_duplicate_filter(embeddings, relevance, self.k, self.threshold)
