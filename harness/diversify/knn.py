"""kNN: the k most similar candidates (ties broken by pool order, shared by every selector)."""

from __future__ import annotations

import numpy as np

from harness.core.types import Pool
from harness.diversify.base import Diversifier


class KNNDiversifier(Diversifier):
    def select_indices(self, pool: Pool) -> np.ndarray:
        scores = pool.embeddings @ pool.query_embedding
        # A stable sort on -score keeps the lower pool index first among equal scores.
        return np.argsort(-scores, kind="stable")[: self.k]
