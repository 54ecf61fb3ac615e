"""Answer-centric evidence packing: an inner packer run over a claim graph of the snippets.

See ``harness.pack.claim_graph`` for the graph and the relevance boost. The inner packer is a whole packer
config placed under ``inner`` (``packer=ace_focused``: ``focused``, ``packer=ace_submod``: ``submod``), so
its parameters are set where that packer defines them (``packer.inner.max_snippets=8``); it chooses among
the claim nodes with the boosted relevance in place of its lexical one. Output snippets are the claim
nodes (text of the earliest duplicate, costs recounted with the reader tokenizer, every merged source).
"""

from __future__ import annotations

from collections.abc import Mapping

from harness.core.types import Context
from harness.pack.base import Packer, PackingRequest, in_reading_order
from harness.pack.claim_graph import build_claim_graph, claim_relevance, claim_request


class AcePacker(Packer):
    """Claim nodes with graph-boosted relevance, chosen by the inner packer's ``select``."""

    def __init__(
        self,
        name: str,
        inner: Packer | Mapping,
        duplicate_threshold: float = 0.95,
        entity_weight: float = 0.5,
        neighbour_weight: float = 0.25,
    ) -> None:
        super().__init__(name)
        if isinstance(inner, Mapping):  # a config node that was not instantiated recursively
            from hydra.utils import instantiate

            inner = instantiate(inner)
        # the inner packer must take the boosted relevance and tokenise terms as the boost does
        if not (isinstance(inner, Packer) and callable(getattr(inner, "select", None)) and hasattr(inner, "stem")):
            raise TypeError(
                f"packer {name!r}: inner must be a packer with select(request, relevance) and stem "
                f"(focused, submod), got {type(inner).__name__}"
            )
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

    def __repr__(self) -> str:
        return f"AcePacker(name={self.name!r}, inner={self.inner!r})"
