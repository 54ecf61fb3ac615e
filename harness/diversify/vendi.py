"""Greedy Vendi selector: grow the set that is most diverse by the Vendi score.

Seeded with the most relevant candidate; each later step adds the candidate maximising
lambda * s_i + (1 - lambda) * (VS(S + i) - VS(S)), where VS is the Vendi score under cosine
similarity and s the query cosine. lambda = 0 (the default) is pure Vendi; lambda = 1 is kNN.
The Vendi score of every S + i is computed at once from a stacked batch of (|S|+1)-square Gram
matrices and one batched symmetric eigen-decomposition.
"""

from __future__ import annotations

import numpy as np

from harness.diversify.mmr import TradeoffDiversifier, check_lambda
from harness.diversify.relevance import check_selection_inputs
from harness.diversify.ties import argmax_stable
from harness.metrics.diversity import unit_rows, vendi_from_gram


def vendi_greedy_select(embeddings: np.ndarray, relevance: np.ndarray, k: int, lambda_: float = 0.0) -> np.ndarray:
    """Indices of min(k, m) items in greedy Vendi order, starting from the most relevant."""
    lambda_ = check_lambda(lambda_, "vendi_greedy_select")
    k_eff = check_selection_inputs(embeddings, relevance, k)
    rows = unit_rows(embeddings)
    m = rows.shape[0]
    chosen = [argmax_stable(relevance)]
    available = np.ones(m, dtype=bool)
    available[chosen[0]] = False
    similarity_to_chosen = np.empty((m, k_eff))  # column t: cosine of every item to the t-th pick
    similarity_to_chosen[:, 0] = rows @ rows[chosen[0]]
    current_vendi = 1.0  # a single item
    for step in range(1, k_eff):
        grams = np.empty((m, step + 1, step + 1))
        grams[:, :step, :step] = similarity_to_chosen[chosen, :step]
        grams[:, step, :step] = similarity_to_chosen[:, :step]
        grams[:, :step, step] = similarity_to_chosen[:, :step]
        grams[:, step, step] = 1.0
        extended_vendi = vendi_from_gram(grams)
        objective = lambda_ * relevance + (1.0 - lambda_) * (extended_vendi - current_vendi)
        pick = argmax_stable(np.where(available, objective, -np.inf))
        chosen.append(pick)
        available[pick] = False
        current_vendi = float(extended_vendi[pick])
        similarity_to_chosen[:, step] = rows @ rows[pick]
    return np.asarray(chosen, dtype=np.intp)


class VendiDiversifier(TradeoffDiversifier):
    def __init__(self, name: str, k: int, lambda_: float = 0.0) -> None:
        super().__init__(name, k, lambda_)

    def choose(self, embeddings: np.ndarray, relevance: np.ndarray) -> np.ndarray:
        return vendi_greedy_select(embeddings, relevance, self.k, self.lambda_)
