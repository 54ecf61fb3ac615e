"""RAPTOR (Sarthi et al., 2024): a static recursive summary tree per document.

Chunks are embedded, reduced (UMAP, else PCA), clustered by Gaussian mixtures sized by BIC with soft
membership, and each cluster is summarised by an LM; the summaries are clustered and summarised in
turn until clustering stops. The tree depends on the document only, so it is cached per document
(key: hash of leaf texts + tree settings + LM identity + encoder identity + seed) and shared by every
question on that document.
"""

from __future__ import annotations

import time

from harness.cache import stable_hash
from harness.core.stage import StageInfo
from harness.core.types import Pool
from harness.tree.base import TreeServices
from harness.tree.recursive import RecursiveSummaryTree
from harness.tree.summary_tree import SummaryTree


class RaptorTree(RecursiveSummaryTree):
    def __init__(self, name: str = "raptor", lm=None, **settings) -> None:
        super().__init__(name=name, lm=lm, **settings)

    def build(self, pool: Pool, services: TreeServices):
        """(tree, layer embeddings, from_cache, key) for the pool's document."""
        leaves, leaf_embeddings = self.leaves(pool, services)
        key = stable_hash(*self.base_key(leaves, services))
        record = self.cached(key)
        if record is not None:
            tree = SummaryTree.from_json(record["tree"])
            return tree, [leaf_embeddings] + self.summary_embeddings(key, tree, services), True, key
        tree, embeddings = self.builder(services).build(leaves, leaf_embeddings)
        self.store(key, {"tree": tree.to_json()}, embeddings)
        return tree, embeddings, False, key

    def expand(self, pool: Pool, services: TreeServices) -> tuple[Pool, StageInfo]:
        start = time.perf_counter()
        tree, embeddings, from_cache, key = self.build(pool, services)
        info = {
            "nodes_per_layer": tree.nodes_per_layer(),
            "summary_nodes": len(tree.summary_nodes()),
            "build_seconds": tree.build_seconds,
            "timings": dict(tree.timings),
            "empty_summaries": tree.empty_summaries,
            # The LM work of building this tree; a tree read from the cache reports its original
            # build's, like build_seconds (``cached`` tells the two apart).
            "lm_calls": tree.lm_calls,
            "lm_prompt_tokens": tree.lm_prompt_tokens,
            "cached": from_cache,
            "cache_key": key,
            "expand_seconds": time.perf_counter() - start,
        }
        return self.tree_pool(pool, tree, embeddings), info
