"""The perturbation interface: controlled redundancy added to retrieved pools."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import replace

import numpy as np

from harness.core.types import Candidate, Pool


class Perturbation(ABC):
    def __init__(self, name: str) -> None:
        self.name = name

    @abstractmethod
    def apply(self, pools: list[Pool], encoder, seed: int) -> list[Pool]: ...


def rerank(pool: Pool, candidates: list[Candidate], embeddings: np.ndarray, size: int | None) -> Pool:
    """Score candidates against the question, sort (stable, so originals win ties) and keep ``size``."""
    scores = embeddings @ pool.query_embedding
    order = np.argsort(-scores, kind="stable")[: size if size else len(candidates)]
    ranked = [replace(candidates[i], score=float(scores[i])) for i in order]
    return Pool(pool.example, ranked, embeddings[order], pool.query_embedding)
