"""The tree interface: turn a question's documents into summary-tree nodes (extra candidates)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any

from harness.types import Pool


@dataclass
class TreeServices:
    """Shared models a tree may call: the encoder (embed nodes) and a language model (summarise)."""

    encoder: Any
    language_model: Any = None
    tokens: Any = None
    seed: int = 0


class Tree(ABC):
    def __init__(self, name: str) -> None:
        self.name = name

    @abstractmethod
    def expand(self, pool: Pool, services: TreeServices) -> Pool:
        """Return the pool the diversifier and packer will see (tree nodes ranked with the rest)."""
