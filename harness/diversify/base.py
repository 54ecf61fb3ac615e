"""The diversifier interface: choose k candidates from a question's pool."""

from __future__ import annotations

from abc import ABC, abstractmethod

import numpy as np

from harness.types import Pool


class Diversifier(ABC):
    def __init__(self, name: str, k: int) -> None:
        if k < 1:
            raise ValueError(f"diversifier {name!r}: k must be >= 1, got {k}")
        self.name = name
        self.k = int(k)

    @abstractmethod
    def select_indices(self, pool: Pool) -> np.ndarray:
        """Indices into ``pool.candidates`` of the chosen candidates, in selection order."""

    def select(self, pool: Pool) -> Pool:
        if len(pool.candidates) == 0:
            return pool
        return pool.subset(self.select_indices(pool))

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r}, k={self.k})"
