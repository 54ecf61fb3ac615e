"""No tree: the pool is the retrieved documents (the dense-retrieval baseline)."""

from __future__ import annotations

from harness.core.stage import StageInfo
from harness.core.types import Pool
from harness.tree.base import Tree, TreeServices


class NoTree(Tree):
    seeded = False

    def __init__(self, name: str = "none") -> None:
        super().__init__(name)

    def expand(self, pool: Pool, services: TreeServices) -> tuple[Pool, StageInfo]:
        return pool, {}
