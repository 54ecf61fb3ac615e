"""The pool stage: retrieve -> rerank -> retrieval metrics of the clean pools -> perturb.

Its entries are kept by :class:`harness.cache.pools.PoolCache` under :func:`harness.cache.pools.pool_key`."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from harness.core.types import Example, Pool
from harness.metrics.retrieval import retrieval_metrics

# The pool stage's code besides what it imports: the dataset loaders, retrievers (encoders, rerankers) and
# perturbations it is handed, built from config ``_target_`` names (``harness.cache.stage_code``).
FINGERPRINT_ROOTS = ("harness.data", "harness.retrieve", "harness.perturb")


def compute_pools(
    examples: Sequence[Example],
    retriever,
    reranker,
    perturbation,
    encoder,
    k: int,
    seed: int,
    timed: Callable[[str, float], None] = lambda stage, start: None,
) -> tuple[list[Pool], list[dict]]:
    """Retrieved (reranked, perturbed) pools and the clean pools' retrieval metrics at ``k``."""
    start = time.perf_counter()
    pools = retriever.retrieve(list(examples))
    if reranker is not None:
        pools = reranker.rerank(pools)
    timed("retrieve", start)
    retrieval = [retrieval_metrics(pool, k) for pool in pools]
    if perturbation is not None:
        start = time.perf_counter()
        pools = perturbation.apply(pools, encoder, seed)
        timed("perturb", start)
    return pools, retrieval
