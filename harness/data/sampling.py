"""The one subsample every loader draws: ``sample_size`` questions chosen with ``seed``, in file order."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

import numpy as np

T = TypeVar("T")


def check_sample_size(sample_size: int | None) -> None:
    """ValueError unless ``sample_size`` is None or a positive integer (a bool is not a size)."""
    if sample_size is not None and (
        isinstance(sample_size, bool) or not isinstance(sample_size, int) or sample_size < 1
    ):
        raise ValueError(f"sample_size must be a positive integer or None, got {sample_size!r}")


def subsample(items: Sequence[T], sample_size: int | None, seed: int) -> list[T]:
    """At most ``sample_size`` of ``items``, drawn by ``numpy.random.default_rng(seed).choice`` without
    replacement and kept in their original order; all of them when ``sample_size`` is None or not
    smaller than their number. The draw depends only on the number of items and the seed, so a
    config names the same questions on every machine."""
    check_sample_size(sample_size)
    if sample_size is None or sample_size >= len(items):
        return list(items)
    chosen = np.sort(np.random.default_rng(seed).choice(len(items), size=sample_size, replace=False))
    return [items[i] for i in chosen]
