"""Query-focused packing: cover the question's content terms, most relevant snippets first.

At each step the packer takes the snippet that adds the most not-yet-covered query terms, breaking ties
by lexical relevance, then by preferring a document not used yet, then by candidate rank. It never
divides by length: a long snippet that covers the question wins over a short one that does not. The
budget is checked after the choice: a chosen snippet that does not fit is skipped for good (the budget
only shrinks) and the search goes on, until nothing left fits.
"""

from __future__ import annotations

import numpy as np

from harness.core.types import Context
from harness.pack.base import Packer, PackingRequest, in_reading_order
from harness.pack.budget import packed_cost, room, room_after
from harness.pack.features import check_max_snippets, snippet_features


def focused_greedy(
    incidence: np.ndarray,
    relevance: np.ndarray,
    doc_codes: np.ndarray,
    ranks: np.ndarray,
    positions: np.ndarray,
    costs: np.ndarray,
    budget: int,
    max_snippets: int | None = None,
) -> tuple[list[int], int]:
    """Indices chosen in selection order, and how many best-ranked snippets were skipped as too long."""
    n = costs.size
    available = np.ones(n, dtype=bool)
    covered = np.zeros(incidence.shape[1], dtype=bool)
    doc_used = np.zeros(int(doc_codes.max()) + 1 if n else 0, dtype=bool)
    chosen: list[int] = []
    left = room([], budget)
    skipped = 0
    cap = n if max_snippets is None else min(n, max_snippets)
    while len(chosen) < cap and available.any():
        candidates = np.flatnonzero(available)
        new_coverage = incidence[np.ix_(candidates, ~covered)].sum(axis=1)
        new_document = ~doc_used[doc_codes[candidates]]
        # np.lexsort sorts ascending by the LAST key first: negate the "larger is better" keys.
        order = np.lexsort(
            (candidates, positions[candidates], ranks[candidates], ~new_document, -relevance[candidates], -new_coverage)
        )
        best = int(candidates[order[0]])
        available[best] = False
        if costs[best] > left:
            skipped += 1
            continue
        chosen.append(best)
        left = room_after(left, costs[best])
        covered |= incidence[best]
        doc_used[doc_codes[best]] = True
    return chosen, skipped


class QueryFocusedPacker(Packer):
    """Greedy query-term coverage under the reader-token budget (no length normalisation)."""

    def __init__(self, name: str = "focused", stem: bool = True, max_snippets: int | None = None) -> None:
        super().__init__(name)
        self.stem = bool(stem)
        self.max_snippets = check_max_snippets(name, max_snippets)

    def select(self, request: PackingRequest, relevance: np.ndarray | None = None) -> tuple[list[int], dict]:
        """Chosen snippet indices (selection order) and diagnostics; ``relevance`` overrides the lexical one."""
        features = snippet_features(request, self.stem)
        if relevance is None:
            relevance = features.lexical
        if features.n == 0:
            return [], {
                "query_terms": sorted(features.query_terms),
                "covered_terms": [],
                "skipped_snippets": 0,
                "packed_cost": 0,
            }
        chosen, skipped = focused_greedy(
            features.incidence,
            np.asarray(relevance, dtype=np.float64),
            features.doc_codes,
            features.ranks,
            features.positions,
            features.costs,
            request.budget,
            self.max_snippets,
        )
        ordered_terms = sorted(features.query_terms)
        covered = features.incidence[chosen].any(axis=0) if chosen else np.zeros(len(ordered_terms), dtype=bool)
        extra = {
            "query_terms": ordered_terms,
            "covered_terms": [t for t, c in zip(ordered_terms, covered, strict=False) if c],
            "skipped_snippets": skipped,  # chosen by the greedy but too long for what was left
            "packed_cost": packed_cost(features.costs[chosen]),
        }
        return chosen, extra

    def pack(self, request: PackingRequest) -> Context:
        chosen, extra = self.select(request)
        snippets = in_reading_order([request.snippets[i] for i in chosen])
        return Context(snippets=snippets, budget=request.budget, packer=self.name, extra=extra)
