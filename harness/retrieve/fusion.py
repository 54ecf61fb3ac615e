"""Fusing two retrievers' scores of the same documents into one (``retriever.fusion``).

- ``rrf``: reciprocal rank fusion (Cormack, Clarke and Büttcher, 2009): ``sum 1 / (rrf_k + rank)`` over the
  rankings, ranks from 1, equal scores ranked by document order;
- ``weighted``: ``dense_weight * dense + (1 - dense_weight) * sparse``, each min-max normalised over the
  documents scored (a retriever that scores them all alike contributes 0).

Imports nothing heavy: the config check validates the settings with :func:`fusion_problems`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from harness.core.values import is_number
from harness.retrieve.corpus import ranks

FUSIONS = ("rrf", "weighted")


def fusion_problems(fusion: Any, rrf_k: Any, dense_weight: Any, prefix: str = "retriever") -> list[str]:
    """One line per invalid fusion setting, naming the key; empty when all are valid."""

    found = []
    if fusion not in FUSIONS:
        found.append(f"{prefix}.fusion={fusion!r} is out of range; allowed: one of {', '.join(FUSIONS)}")
    if not (is_number(rrf_k) and rrf_k >= 0):
        found.append(f"{prefix}.rrf_k={rrf_k!r} is out of range; allowed: a number >= 0 (RRF's constant k)")
    if not (is_number(dense_weight) and 0 <= dense_weight <= 1):
        found.append(f"{prefix}.dense_weight={dense_weight!r} is out of range; allowed: a number in [0, 1]")
    return found


def reciprocal_rank_fusion(score_vectors: Sequence[np.ndarray], k: float) -> np.ndarray:
    """``sum over the vectors of 1 / (k + rank)``, each document's rank under each vector (from 1)."""
    return np.sum([1.0 / (float(k) + ranks(scores)) for scores in score_vectors], axis=0)


def min_max(scores: np.ndarray) -> np.ndarray:
    """``scores`` mapped onto [0, 1] (all zeros when they are all equal)."""
    scores = np.asarray(scores, dtype=np.float64)
    if not len(scores):
        return scores
    low, high = scores.min(), scores.max()
    return (scores - low) / (high - low) if high > low else np.zeros_like(scores)


def weighted_fusion(dense: np.ndarray, sparse: np.ndarray, dense_weight: float) -> np.ndarray:
    return float(dense_weight) * min_max(dense) + (1.0 - float(dense_weight)) * min_max(sparse)
