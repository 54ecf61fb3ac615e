"""Deterministic tie-breaking shared by every selector.

Arrays are indexed in pool order, and a pool is in retrieval-rank order, so "the lower pool index
wins" means "the better-ranked candidate wins". ``np.argmax``/``np.argmin`` return the first
occurrence of the extreme value and a stable sort keeps equal keys in index order, which gives
exactly that rule without any explicit tie handling in the selectors.
"""

from __future__ import annotations

import numpy as np


def _check_values(values: np.ndarray, what: str) -> np.ndarray:
    values = np.asarray(values)
    if values.ndim != 1 or values.size == 0:
        raise ValueError(f"{what} needs a non-empty 1-D array, got shape {values.shape}")
    return values


def argmax_stable(values: np.ndarray) -> int:
    """Index of the largest value; among equal values the lowest index (NaN counts as largest)."""
    return int(np.argmax(_check_values(values, "argmax_stable")))


def argmin_stable(values: np.ndarray) -> int:
    """Index of the smallest value; among equal values the lowest index (NaN counts as smallest)."""
    return int(np.argmin(_check_values(values, "argmin_stable")))


def descending_order(values: np.ndarray) -> np.ndarray:
    """All indices from the largest value down; equal values keep increasing index order."""
    return np.argsort(-np.asarray(values), kind="stable")


def ascending_order(values: np.ndarray) -> np.ndarray:
    """All indices from the smallest value up; equal values keep increasing index order."""
    return np.argsort(np.asarray(values), kind="stable")
