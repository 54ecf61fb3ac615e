"""Greedy MAP inference for a determinantal point process (Chen, Zhang & Zhou, NeurIPS 2018).

Kernel: L = diag(q) C diag(q), with C the cosine Gram of the pool and the quality
q_i = max(s_i, 0) + floor, s the query cosine. Each greedy step adds the item with the largest
d_i^2 = det(L_{S+i}) / det(L_S), i.e. the largest increase of log det L_S; Chen et al.'s
incremental Cholesky-style orthogonalisation keeps every d_i^2 current with one (m, d) mat-vec
and an O(m |S|) update per step, never forming L.

Stopping: the greedy loop ends after k items, or earlier when the best d_i^2 (the multiplicative
gain in det L_S) is <= ``min_gain`` (1e-10): the remaining items are then numerically inside the
span of the chosen ones. The selection is then completed with the most relevant unchosen items in
kNN order, so exactly min(k, m) indices are always returned (the pipeline expects k documents).

The floor (1e-3) keeps items with non-positive query similarity from being all-degenerate: their
L_ii = floor^2 = 1e-6 stays far above ``min_gain``, so they remain selectable (and ordered by
diversity) once the relevant items are spanned, while any positively relevant item outranks them.
Arithmetic is float64 so that the 1e-10 threshold is meaningful.
"""

from __future__ import annotations

import numpy as np

from harness.diversify.base import EmbeddingDiversifier
from harness.diversify.relevance import check_selection_inputs, fill_in_rank_order
from harness.diversify.ties import argmax_stable

DEFAULT_RELEVANCE_FLOOR = 1e-3
DEFAULT_MIN_GAIN = 1e-10


def _squared_norms(rows: np.ndarray) -> np.ndarray:
    # np.vecdot (NumPy >= 2) is several times faster than einsum for this row-wise reduction.
    return np.vecdot(rows, rows) if hasattr(np, "vecdot") else np.einsum("ij,ij->i", rows, rows)


def dpp_quality(relevance: np.ndarray, relevance_floor: float = DEFAULT_RELEVANCE_FLOOR) -> np.ndarray:
    """Per-item DPP quality q = max(s, 0) + floor."""
    return np.maximum(np.asarray(relevance, dtype=np.float64), 0.0) + relevance_floor


def dpp_greedy_map(
    embeddings: np.ndarray,
    relevance: np.ndarray,
    k: int,
    relevance_floor: float = DEFAULT_RELEVANCE_FLOOR,
    min_gain: float = DEFAULT_MIN_GAIN,
) -> tuple[np.ndarray, int]:
    """(indices, n_greedy): min(k, m) indices, of which the first ``n_greedy`` are greedy MAP picks
    and the rest the kNN-order completion after an early stop."""
    k_eff = check_selection_inputs(embeddings, relevance, k)
    features = np.asarray(embeddings, dtype=np.float64)
    quality = dpp_quality(relevance, relevance_floor)
    # d_i^2 starts at L_ii; squared norms rather than 1 so that L is exactly the Gram we describe.
    gains = quality * quality * _squared_norms(features)
    components = np.empty((k_eff, relevance.shape[0]), dtype=np.float64)
    available = np.ones(relevance.shape[0], dtype=bool)
    chosen: list[int] = []
    for step in range(k_eff):
        masked = np.where(available, gains, -np.inf)
        pick = argmax_stable(masked)
        if masked[pick] <= min_gain:
            break
        chosen.append(pick)
        available[pick] = False
        if step + 1 == k_eff:
            break
        kernel_row = quality[pick] * quality * (features @ features[pick])  # L[pick, :]
        component = (kernel_row - components[:step, pick] @ components[:step]) / np.sqrt(gains[pick])
        components[step] = component
        gains -= component * component
    return fill_in_rank_order(chosen, relevance, k_eff), len(chosen)


class DPPDiversifier(EmbeddingDiversifier):
    shown_settings = ("relevance_floor", "min_gain")

    def __init__(
        self,
        name: str,
        k: int,
        relevance_floor: float = DEFAULT_RELEVANCE_FLOOR,
        min_gain: float = DEFAULT_MIN_GAIN,
    ) -> None:
        super().__init__(name, k)
        if not relevance_floor > 0.0:
            raise ValueError(f"diversifier {name!r}: relevance_floor must be > 0, got {relevance_floor}")
        if not min_gain >= 0.0:
            raise ValueError(f"diversifier {name!r}: min_gain must be >= 0, got {min_gain}")
        self.relevance_floor = float(relevance_floor)
        self.min_gain = float(min_gain)

    def choose(self, embeddings: np.ndarray, relevance: np.ndarray) -> np.ndarray:
        indices, _ = dpp_greedy_map(embeddings, relevance, self.k, self.relevance_floor, self.min_gain)
        return indices
