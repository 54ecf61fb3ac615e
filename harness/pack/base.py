"""The packer interface: fit snippets of the selected candidates into a reader-token budget."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass

import numpy as np

from harness.core.protocols import TokenMeasure
from harness.core.types import Context, Pool, Snippet


@dataclass
class PackingRequest:
    """Everything a packer may use for one question. Every packer sees the same snippets."""

    question: str
    pool: Pool  # the candidates that survived tree -> diversifier, in rank order
    snippets: list[Snippet]
    snippet_embeddings: np.ndarray  # (n, d), L2-normalised, aligned with snippets
    query_embedding: np.ndarray  # (d,)
    budget: int  # reader tokens allowed for the rendered context
    tokens: TokenMeasure  # the reader's own tokenizer
    seed: int = 0

    @property
    def relevance(self) -> np.ndarray:
        """Cosine similarity of each snippet to the question."""
        if len(self.snippets) == 0:
            return np.zeros(0, dtype=np.float32)
        return self.snippet_embeddings @ self.query_embedding

    @property
    def costs(self) -> np.ndarray:
        return np.array([s.tokens for s in self.snippets], dtype=np.int64)


class Packer(ABC):
    """Chooses and orders snippets; always returns the Context the reader will see.

    ``Context.extra`` is the packer's report on the question (objective value, singleton fallback,
    skipped snippets, compression ratio): the pipeline writes each key as a ``pack.<key>`` row column.
    Report the same keys for every question, so the column is filled in every row.
    """

    #: packers that never look at snippets (whole candidates as the context) set this to False,
    #: which spares the pipeline splitting and embedding them
    uses_snippets: bool = True
    #: packers that draw random numbers (from ``PackingRequest.seed``) set this: the pipeline then keys
    #: their packings by the run's seed too, instead of reusing another seed's packing of the same inputs
    seeded: bool = False

    def __init__(self, name: str) -> None:
        self.name = name

    @abstractmethod
    def pack(self, request: PackingRequest) -> Context:
        """The context for this request, its ``extra`` holding the packer's facts about it."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r})"


def in_reading_order(snippets: list[Snippet]) -> list[Snippet]:
    """Order chosen snippets by candidate rank, then by position inside the candidate."""
    return sorted(snippets, key=lambda s: (s.rank, s.position))
