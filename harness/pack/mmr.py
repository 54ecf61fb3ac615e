"""Maximal marginal relevance packing under the reader-token budget.

Score of a candidate given the chosen set S:  lambda * cos(i, q) - (1 - lambda) * max_{j in S} cos(i, j)
(the redundancy term is 0 while S is empty); lambda defaults to the harness-wide 0.7
(``harness.diversify.mmr.DEFAULT_LAMBDA``). The running max-similarity vector is updated with one
row of the similarity matrix per step, so each step is O(n d). Snippets that no longer fit are dropped
from the candidates; the loop ends when none fits.
"""

from __future__ import annotations

import numpy as np

from harness.diversify.mmr import DEFAULT_LAMBDA
from harness.pack.base import Packer, PackingRequest, in_reading_order
from harness.pack.budget import addable, packed_cost
from harness.pack.features import check_max_snippets
from harness.types import Context


def mmr_greedy(
    relevance: np.ndarray,
    embeddings: np.ndarray,
    costs: np.ndarray,
    budget: int,
    relevance_weight: float = DEFAULT_LAMBDA,
    max_snippets: int | None = None,
) -> tuple[list[int], list[float]]:
    """Indices chosen in selection order and the MMR score each had when chosen."""
    n = costs.size
    available = np.ones(n, dtype=bool)
    max_similarity = np.zeros(n, dtype=np.float64)
    chosen: list[int] = []
    scores: list[float] = []
    cap = n if max_snippets is None else min(n, max_snippets)
    while len(chosen) < cap:
        available &= addable(costs[chosen], costs, budget)
        if not available.any():
            break
        score = relevance_weight * relevance - (1.0 - relevance_weight) * max_similarity
        score = np.where(available, score, -np.inf)
        best = int(np.argmax(score))
        chosen.append(best)
        scores.append(float(score[best]))
        available[best] = False
        # one similarity row per step: O(n d) instead of the full O(n^2 d) matrix
        row = embeddings @ embeddings[best]
        max_similarity = row if len(chosen) == 1 else np.maximum(max_similarity, row)
    return chosen, scores


class MMRPacker(Packer):
    """MMR over snippet embeddings: relevance = cosine to the question, redundancy = max cosine to S."""

    def __init__(self, name: str = "mmr", relevance_weight: float = DEFAULT_LAMBDA, max_snippets: int | None = None) -> None:
        super().__init__(name)
        if not 0.0 <= float(relevance_weight) <= 1.0:
            raise ValueError(f"packer {name!r}: relevance_weight (lambda) must be in [0, 1], got {relevance_weight}")
        self.relevance_weight = float(relevance_weight)
        self.max_snippets = check_max_snippets(name, max_snippets)

    def pack(self, request: PackingRequest) -> Context:
        costs = request.costs
        if costs.size == 0:
            return Context(snippets=[], budget=request.budget, packer=self.name,
                           extra={"mmr_scores": [], "packed_cost": 0})
        embeddings = np.asarray(request.snippet_embeddings, dtype=np.float64)
        relevance = embeddings @ np.asarray(request.query_embedding, dtype=np.float64)
        chosen, scores = mmr_greedy(
            relevance, embeddings, costs, request.budget, self.relevance_weight, self.max_snippets
        )
        snippets = in_reading_order([request.snippets[i] for i in chosen])
        extra = {"mmr_scores": scores, "packed_cost": packed_cost(costs[chosen])}
        return Context(snippets=snippets, budget=request.budget, packer=self.name, extra=extra)
