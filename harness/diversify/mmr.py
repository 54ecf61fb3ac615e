"""Maximal Marginal Relevance (Carbonell & Goldstein 1998).

Greedy: each step takes argmax_i  lambda * s_i - (1 - lambda) * max_{j in S} <e_i, e_j>, with s the
query cosine. The first pick is the most relevant candidate (the max over an empty set is
undefined), and lambda = 1 reproduces kNN exactly because the diversity term is multiplied by 0.

One default lambda, ``DEFAULT_LAMBDA`` = 0.7 (the papers' setting), serves ``diversifier=mmr``, the rule's
inner MMR and ``packer=mmr`` alike, so MMR rows from the three stages are comparable; the report states the
lambda each table's rows used.
"""

from __future__ import annotations

import numpy as np

from harness.diversify.base import Diversifier
from harness.diversify.relevance import check_selection_inputs, query_similarity
from harness.diversify.ties import argmax_stable
from harness.types import Pool

#: relevance weight of every MMR in the harness unless a config says otherwise
DEFAULT_LAMBDA = 0.7


def check_lambda(lambda_: float, owner: str) -> float:
    lambda_ = float(lambda_)
    if not 0.0 <= lambda_ <= 1.0:
        raise ValueError(f"{owner}: lambda_ must lie in [0, 1], got {lambda_}")
    return lambda_


def mmr_select(
    embeddings: np.ndarray, relevance: np.ndarray, k: int, lambda_: float = DEFAULT_LAMBDA
) -> np.ndarray:
    """Indices of min(k, m) items in MMR selection order.

    ``embeddings`` (m, d) has unit rows; ``relevance`` (m,) is the query similarity. Similarities to
    the selected set are kept as a running maximum, so a step costs one (m, d) mat-vec.
    """
    lambda_ = check_lambda(lambda_, "mmr_select")
    k_eff = check_selection_inputs(embeddings, relevance, k)
    chosen = np.empty(k_eff, dtype=np.intp)
    chosen[0] = argmax_stable(relevance)
    if k_eff == 1:
        return chosen
    available = np.ones(relevance.shape[0], dtype=bool)
    available[chosen[0]] = False
    max_similarity = np.asarray(embeddings @ embeddings[chosen[0]], dtype=np.float64)
    relevance_term = lambda_ * relevance
    diversity_weight = 1.0 - lambda_
    for step in range(1, k_eff):
        objective = np.where(available, relevance_term - diversity_weight * max_similarity, -np.inf)
        pick = argmax_stable(objective)
        chosen[step] = pick
        available[pick] = False
        if step + 1 < k_eff:
            np.maximum(max_similarity, embeddings @ embeddings[pick], out=max_similarity)
    return chosen


class MMRDiversifier(Diversifier):
    def __init__(self, name: str, k: int, lambda_: float = DEFAULT_LAMBDA) -> None:
        super().__init__(name, k)
        self.lambda_ = check_lambda(lambda_, f"diversifier {name!r}")

    def select_indices(self, pool: Pool) -> np.ndarray:
        if not pool.candidates:
            return np.empty(0, dtype=np.intp)
        return mmr_select(pool.embeddings, query_similarity(pool), self.k, self.lambda_)

    def __repr__(self) -> str:
        return f"MMRDiversifier(name={self.name!r}, k={self.k}, lambda_={self.lambda_})"
