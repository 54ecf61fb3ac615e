"""Maximal marginal relevance packing under the reader-token budget.

Score of a candidate given the chosen set S:  lambda * cos(i, q) - (1 - lambda) * max_{j in S} cos(i, j)
(the redundancy term is 0 while S is empty); lambda defaults to the harness-wide 0.7. The loop is the
diversifier's (``harness.diversify.mmr.mmr_greedy``) with the budget as its feasibility mask: snippets
that no longer fit are dropped from the candidates, and the loop ends when none fits.
"""

from __future__ import annotations

import numpy as np

from harness.core.types import Context
from harness.diversify.mmr import DEFAULT_LAMBDA, check_lambda, mmr_greedy
from harness.pack.base import Packer, PackingRequest, in_reading_order
from harness.pack.budget import addable, packed_cost
from harness.pack.features import check_max_snippets


class MMRPacker(Packer):
    """MMR over snippet embeddings: relevance = cosine to the question, redundancy = max cosine to S."""

    def __init__(
        self, name: str = "mmr", relevance_weight: float = DEFAULT_LAMBDA, max_snippets: int | None = None
    ) -> None:
        super().__init__(name)
        self.relevance_weight = check_lambda(relevance_weight, f"packer {name!r}", "relevance_weight (lambda)")
        self.max_snippets = check_max_snippets(name, max_snippets)

    def pack(self, request: PackingRequest) -> Context:
        costs = request.costs
        if costs.size == 0:
            return Context(
                snippets=[], budget=request.budget, packer=self.name, extra={"mmr_scores": [], "packed_cost": 0}
            )
        embeddings = np.asarray(request.snippet_embeddings, dtype=np.float64)
        relevance = embeddings @ np.asarray(request.query_embedding, dtype=np.float64)
        limit = costs.size if self.max_snippets is None else min(costs.size, self.max_snippets)
        chosen, scores = mmr_greedy(
            embeddings,
            relevance,
            self.relevance_weight,
            limit,
            feasible=lambda chosen: addable(costs[chosen], costs, request.budget),
            first_by_relevance=False,
        )
        snippets = in_reading_order([request.snippets[i] for i in chosen])
        extra = {"mmr_scores": scores, "packed_cost": packed_cost(costs[chosen])}
        return Context(snippets=snippets, budget=request.budget, packer=self.name, extra=extra)
