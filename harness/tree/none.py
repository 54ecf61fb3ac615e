"""No tree: the pool is the retrieved documents (the dense-retrieval baseline)."""

from __future__ import annotations

from harness.core.stage import StageInfo
from harness.core.types import Pool
from harness.tree.base import Tree, TreeServices


class NoTree(Tree):
    seeded = False

    def __init__(self, name: str = "none", cache_dir: str | None = None) -> None:
        # ``cache_dir`` (where the other trees keep what they build) is accepted and unused, so a sweep that
        # places its trees' store (tree.cache_dir) can run its no-tree baseline beside them.
        super().__init__(name)

    def expand(self, pool: Pool, services: TreeServices) -> tuple[Pool, StageInfo]:
        return pool, {}
