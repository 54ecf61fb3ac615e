"""The diversifier interface: choose k candidates from a question's pool."""

from __future__ import annotations

from abc import ABC, abstractmethod

import numpy as np

from harness.core.stage import StageInfo
from harness.core.types import Pool
from harness.diversify.relevance import query_similarity


class Diversifier(ABC):
    """Chooses k candidates. ``select`` is what the pipeline calls: the chosen indices and what the
    diversifier reports about this question (row columns ``diversify.<key>``). A diversifier with
    nothing to report implements ``select_indices`` only; one with per-question facts (the rule's
    ``rule_triggered``) overrides ``select`` and derives ``select_indices`` from it. The object is
    shared by every question of a run, so per-question facts are returned, never stored on it."""

    # The settings ``__repr__`` shows after name and k, by attribute name, so a subclass names them once.
    shown_settings: tuple[str, ...] = ()

    def __init__(self, name: str, k: int) -> None:
        if k < 1:
            raise ValueError(f"diversifier {name!r}: k must be >= 1, got {k}")
        self.name = name
        self.k = int(k)

    @abstractmethod
    def select_indices(self, pool: Pool) -> np.ndarray:
        """Indices into ``pool.candidates`` of the chosen candidates, in selection order."""

    def select(self, pool: Pool) -> tuple[np.ndarray, StageInfo]:
        """Indices into ``pool.candidates`` (selection order) and this question's facts."""
        if len(pool.candidates) == 0:
            return np.empty(0, dtype=np.intp), {}
        return np.asarray(self.select_indices(pool), dtype=np.intp), {}

    def __repr__(self) -> str:
        settings = "".join(f", {key}={getattr(self, key)!r}" for key in self.shown_settings)
        return f"{type(self).__name__}(name={self.name!r}, k={self.k}{settings})"


class EmbeddingDiversifier(Diversifier):
    """A diversifier whose kernel sees only the candidates' embeddings and their cosine to the question."""

    def select_indices(self, pool: Pool) -> np.ndarray:
        if not pool.candidates:  # the kernels refuse an empty pool
            return np.empty(0, dtype=np.intp)
        return self.choose(pool.embeddings, query_similarity(pool))

    @abstractmethod
    def choose(self, embeddings: np.ndarray, relevance: np.ndarray) -> np.ndarray:
        """Indices into the rows of ``embeddings`` (unit rows; ``relevance`` their query cosine), in order."""
