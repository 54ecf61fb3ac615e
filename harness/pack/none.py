"""No packing: the selected candidates, whole and in rank order, are the context (no budget)."""

from __future__ import annotations

from harness.core.types import Context, Snippet
from harness.pack.base import Packer, PackingRequest
from harness.retrieve.dense import candidate_text


class NoPacker(Packer):
    uses_snippets = False

    def __init__(self, name: str = "none") -> None:
        super().__init__(name)

    def pack(self, request: PackingRequest) -> Context:
        candidates = request.pool.candidates
        texts = [candidate_text(c) for c in candidates]
        costs = request.tokens.count_many(texts)
        snippets = [
            Snippet(text=text, cand_id=c.cand_id, source_ids=c.source_ids, tokens=cost, title=c.title, rank=rank)
            for rank, (c, text, cost) in enumerate(zip(candidates, texts, costs, strict=False))
        ]
        return Context(snippets=snippets, budget=None, packer=self.name)
