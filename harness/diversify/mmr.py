"""Maximal Marginal Relevance (Carbonell & Goldstein 1998): the one kernel for diversifier and packer.

Greedy: each step takes argmax_i  lambda * s_i - (1 - lambda) * max_{j in S} <e_i, e_j>, with s the
query cosine. The first pick is the most relevant candidate (the max over an empty set is
undefined), and lambda = 1 reproduces kNN exactly because the diversity term is multiplied by 0.

``mmr_greedy`` is that loop for both stages: ``diversifier=mmr`` (and the rule's inner MMR) chooses k
candidates; ``packer=mmr`` (``harness.pack.mmr``) chooses snippets under the reader-token budget, passing
a feasibility mask, and takes its first pick by the objective with a redundancy of 0 to the empty set (at
lambda = 0 the first snippet in rank order rather than the most relevant).

One default lambda, ``DEFAULT_LAMBDA`` = 0.7 (the papers' setting), serves ``diversifier=mmr``, the rule's
inner MMR and ``packer=mmr`` alike, so MMR rows from the three stages are comparable; the report states the
lambda each table's rows used (the constant lives in ``harness.metrics.mmr``, where the report reads it).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from harness.diversify.base import EmbeddingDiversifier
from harness.diversify.relevance import check_selection_inputs
from harness.diversify.ties import argmax_stable
from harness.metrics.mmr import DEFAULT_LAMBDA


def check_lambda(lambda_: float, owner: str, key: str = "lambda_") -> float:
    lambda_ = float(lambda_)
    if not 0.0 <= lambda_ <= 1.0:
        raise ValueError(f"{owner}: {key} must lie in [0, 1], got {lambda_}")
    return lambda_


def mmr_greedy(
    embeddings: np.ndarray,
    relevance: np.ndarray,
    lambda_: float,
    limit: int,
    feasible: Callable[[list[int]], np.ndarray] | None = None,
    first_by_relevance: bool = True,
) -> tuple[list[int], list[float]]:
    """Up to ``limit`` indices in MMR selection order and the objective each had when chosen.

    ``embeddings`` (m, d) has unit rows; ``relevance`` (m,) is the query similarity. ``feasible(chosen)``,
    if given, is the mask of items that may join the chosen ones (the packer's budget): only those compete,
    an item once infeasible stays out, and the loop ends when none is left. Similarities to the chosen set
    are kept as a running maximum, so a step costs one (m, d) mat-vec; ties go to the lowest index.
    """
    m = relevance.shape[0]
    available = np.ones(m, dtype=bool)
    max_similarity = np.zeros(m, dtype=np.float64)
    relevance_term = lambda_ * relevance
    diversity_weight = 1.0 - lambda_
    chosen: list[int] = []
    scores: list[float] = []
    while len(chosen) < limit:
        if feasible is not None:
            available &= feasible(chosen)
            if not available.any():
                break
        objective = np.where(available, relevance_term - diversity_weight * max_similarity, -np.inf)
        if chosen or not first_by_relevance:
            pick = argmax_stable(objective)
        else:
            pick = argmax_stable(np.where(available, relevance, -np.inf))
        chosen.append(pick)
        scores.append(float(objective[pick]))
        available[pick] = False
        if len(chosen) < limit:
            row = embeddings @ embeddings[pick]
            if len(chosen) == 1:  # redundancy to {pick} is the cosine itself, negative ones included
                max_similarity = np.asarray(row, dtype=np.float64)
            else:
                np.maximum(max_similarity, row, out=max_similarity)
    return chosen, scores


def mmr_select(embeddings: np.ndarray, relevance: np.ndarray, k: int, lambda_: float = DEFAULT_LAMBDA) -> np.ndarray:
    """Indices of min(k, m) items in MMR selection order."""
    lambda_ = check_lambda(lambda_, "mmr_select")
    k_eff = check_selection_inputs(embeddings, relevance, k)
    chosen, _ = mmr_greedy(embeddings, relevance, lambda_, k_eff)
    return np.asarray(chosen, dtype=np.intp)


class TradeoffDiversifier(EmbeddingDiversifier):
    """A greedy selector weighing relevance by ``lambda_`` against a diversity gain by 1 - ``lambda_``
    (MMR here, Vendi in ``harness.diversify.vendi``): one setting, checked and shown alike."""

    shown_settings = ("lambda_",)

    def __init__(self, name: str, k: int, lambda_: float) -> None:
        super().__init__(name, k)
        self.lambda_ = check_lambda(lambda_, f"diversifier {name!r}")


class MMRDiversifier(TradeoffDiversifier):
    def __init__(self, name: str, k: int, lambda_: float = DEFAULT_LAMBDA) -> None:
        super().__init__(name, k, lambda_)

    def choose(self, embeddings: np.ndarray, relevance: np.ndarray) -> np.ndarray:
        return mmr_select(embeddings, relevance, self.k, self.lambda_)
