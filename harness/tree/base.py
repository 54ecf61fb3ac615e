"""The tree interface: turn a question's documents into summary-tree nodes (extra candidates)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass

from harness.core.protocols import TextEncoder, TokenMeasure
from harness.core.stage import StageInfo
from harness.core.types import Pool


@dataclass
class TreeServices:
    """Shared models a tree may call: the encoder (embed nodes) and the reader's tokens (count and cut text).
    A tree's language model is its own (``lm``): the reader only answers questions."""

    encoder: TextEncoder
    tokens: TokenMeasure | None = None
    seed: int = 0


class Tree(ABC):
    """One tree object serves every question of a run, so it keeps no per-question state: what it
    learns about a question (class, nodes per layer, build time) is returned with that question's pool."""

    #: whether ``expand`` draws from ``TreeServices.seed`` (clustering does): the pipeline then keys its
    #: selections by the run's seed too; a tree that does not draw sets this to False
    seeded: bool = True

    def __init__(self, name: str) -> None:
        self.name = name

    @abstractmethod
    def expand(self, pool: Pool, services: TreeServices) -> tuple[Pool, StageInfo]:
        """The pool the diversifier and packer will see (tree nodes ranked with the rest) and this
        question's build facts, which become the row's ``tree.<key>`` columns (``harness.core.stage``)."""
