"""Answer-centric evidence packers: the focused and submodular packers run over a claim graph.

See ``harness.pack.claim_graph`` for the graph and the relevance boost. Output snippets are the claim
nodes (text of the earliest duplicate, costs recounted with the reader tokenizer, every merged source).
"""

from __future__ import annotations

from harness.pack.base import Packer, PackingRequest, in_reading_order
from harness.pack.claim_graph import build_claim_graph, claim_relevance, claim_request
from harness.pack.focused import QueryFocusedPacker
from harness.pack.submod import SubmodularPacker
from harness.types import Context


class _ClaimGraphPacker(Packer):
    def __init__(
        self,
        name: str,
        inner: QueryFocusedPacker | SubmodularPacker,
        duplicate_threshold: float,
        entity_weight: float,
        neighbour_weight: float,
    ) -> None:
        super().__init__(name)
        if not 0.0 < float(duplicate_threshold) <= 1.0:
            raise ValueError(f"packer {name!r}: duplicate_threshold must be in (0, 1], got {duplicate_threshold}")
        for label, weight in (("entity_weight", entity_weight), ("neighbour_weight", neighbour_weight)):
            if float(weight) < 0:
                raise ValueError(f"packer {name!r}: {label} must be >= 0, got {weight}")
        self.inner = inner
        self.duplicate_threshold = float(duplicate_threshold)
        self.entity_weight = float(entity_weight)
        self.neighbour_weight = float(neighbour_weight)

    def pack(self, request: PackingRequest) -> Context:
        graph = build_claim_graph(request, self.duplicate_threshold)
        relevance, question_entities = claim_relevance(
            graph, request.question, self.entity_weight, self.neighbour_weight, self.inner.stem
        )
        chosen, extra = self.inner.select(claim_request(request, graph), relevance=relevance)
        extra = dict(extra)
        extra.update(
            {
                "claims": len(graph.claims),
                "merged_snippets": len(request.snippets) - len(graph.claims),
                "claim_edges": graph.n_edges,
                "question_entities": sorted(question_entities),
            }
        )
        snippets = in_reading_order([graph.claims[i] for i in chosen])
        return Context(snippets=snippets, budget=request.budget, packer=self.name, extra=extra)


class AceFocusedPacker(_ClaimGraphPacker):
    """Query-focused greedy over claim nodes with graph-boosted relevance."""

    def __init__(
        self,
        name: str = "ace_focused",
        duplicate_threshold: float = 0.95,
        entity_weight: float = 0.5,
        neighbour_weight: float = 0.25,
        stem: bool = True,
        max_snippets: int | None = None,
    ) -> None:
        inner = QueryFocusedPacker(name=name, stem=stem, max_snippets=max_snippets)
        super().__init__(name, inner, duplicate_threshold, entity_weight, neighbour_weight)


class AceSubmodularPacker(_ClaimGraphPacker):
    """Submodular packing over claim nodes with graph-boosted relevance."""

    def __init__(
        self,
        name: str = "ace_submod",
        duplicate_threshold: float = 0.95,
        entity_weight: float = 0.5,
        neighbour_weight: float = 0.25,
        w_rel: float = 1.0,
        w_qry: float = 0.5,
        w_cov: float = 0.4,
        w_div: float = 0.3,
        alpha: float = 0.3,
        max_snippets: int | None = 32,
        diversity_relevance: str = "lexical",
        stem: bool = True,
    ) -> None:
        inner = SubmodularPacker(
            name=name,
            w_rel=w_rel,
            w_qry=w_qry,
            w_cov=w_cov,
            w_div=w_div,
            alpha=alpha,
            max_snippets=max_snippets,
            diversity_relevance=diversity_relevance,
            stem=stem,
        )
        super().__init__(name, inner, duplicate_threshold, entity_weight, neighbour_weight)
