"""The one subsample every loader draws: ``sample_size`` questions chosen with ``seed``, in file order."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TypeVar

import numpy as np

T = TypeVar("T")

log = logging.getLogger("harness.data")
# (source, sample size, questions) already warned about: the config check and the pipeline may load the same
# file twice in one process, and each job of a sweep loads it again; the user is told once.
_WARNED: set[tuple[str, int, int]] = set()


def check_sample_size(sample_size: int | None) -> None:
    """ValueError unless ``sample_size`` is None or a positive integer (a bool is not a size)."""
    if sample_size is not None and (
        isinstance(sample_size, bool) or not isinstance(sample_size, int) or sample_size < 1
    ):
        raise ValueError(f"sample_size must be a positive integer or None, got {sample_size!r}")


def subsample(items: Sequence[T], sample_size: int | None, seed: int, source: str | None = None) -> list[T]:
    """At most ``sample_size`` of ``items``, drawn by ``numpy.random.default_rng(seed).choice`` without
    replacement and kept in their original order; all of them when ``sample_size`` is None or not
    smaller than their number. The draw depends only on the number of items and the seed, so a
    config names the same questions on every machine. A size above the number of items loads them all,
    with one warning line naming ``source`` (the file), once per process."""
    check_sample_size(sample_size)
    if sample_size is not None and sample_size > len(items):
        where = source or "the dataset"
        if (where, sample_size, len(items)) not in _WARNED:
            _WARNED.add((where, sample_size, len(items)))
            log.warning(
                "dataset.sample_size=%d but %s holds %d questions: all %d are loaded",
                sample_size,
                where,
                len(items),
                len(items),
            )
    if sample_size is None or sample_size >= len(items):
        return list(items)
    chosen = np.sort(np.random.default_rng(seed).choice(len(items), size=sample_size, replace=False))
    return [items[i] for i in chosen]
