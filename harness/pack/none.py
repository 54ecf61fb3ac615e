"""No packing: the selected candidates, whole and in rank order, are the context (no budget)."""

from __future__ import annotations

from harness.pack.base import Packer, PackingRequest
from harness.types import Context, Snippet


class NoPacker(Packer):
    uses_snippets = False

    def __init__(self, name: str = "none") -> None:
        super().__init__(name)

    def pack(self, request: PackingRequest) -> Context:
        snippets = [
            Snippet(
                text=f"{c.title}: {c.text}" if c.title else c.text,
                cand_id=c.cand_id,
                source_ids=c.source_ids,
                tokens=0,
                title=c.title,
                rank=rank,
            )
            for rank, c in enumerate(request.pool.candidates)
        ]
        costs = request.tokens.count_many([s.text for s in snippets])
        snippets = [Snippet(**{**s.__dict__, "tokens": cost}) for s, cost in zip(snippets, costs)]
        return Context(snippets=snippets, budget=None, packer=self.name)
