"""No diversification: the whole retrieved pool goes on to the packer."""

from __future__ import annotations

import numpy as np

from harness.core.types import Pool
from harness.diversify.base import Diversifier


class NoDiversifier(Diversifier):
    def __init__(self, name: str = "none", k: int | None = None) -> None:
        super().__init__(name, k or 1)

    def select_indices(self, pool: Pool) -> np.ndarray:
        return np.arange(len(pool.candidates))
