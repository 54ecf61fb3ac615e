"""No tree: the pool is the retrieved documents (the dense-retrieval baseline)."""

from __future__ import annotations

from harness.stage import StageInfo
from harness.tree.base import Tree, TreeServices
from harness.types import Pool


class NoTree(Tree):
    seeded = False

    def __init__(self, name: str = "none") -> None:
        super().__init__(name)

    def expand(self, pool: Pool, services: TreeServices) -> tuple[Pool, StageInfo]:
        return pool, {}
