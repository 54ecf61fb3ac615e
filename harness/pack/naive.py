"""Naive top-k-and-truncate: concatenate snippets in relevance order until the budget is hit."""

from __future__ import annotations

from dataclasses import replace

from harness.pack.base import Packer, PackingRequest
from harness.types import Context


class TopKTruncatePacker(Packer):
    """Walks candidates in retrieval rank order and their sentences in reading order; the snippet that
    crosses the budget is truncated to the tokens left, and packing stops there."""

    def __init__(self, name: str = "packed", truncate_last: bool = True) -> None:
        super().__init__(name)
        self.truncate_last = truncate_last

    def pack(self, request: PackingRequest) -> Context:
        chosen, used = [], 0
        for snip in sorted(request.snippets, key=lambda s: (s.rank, s.position)):
            separator = 1 if chosen else 0
            if used + separator + snip.tokens <= request.budget:
                chosen.append(snip)
                used += separator + snip.tokens
                continue
            left = request.budget - used - separator
            if self.truncate_last and left > 0:
                text = request.tokens.truncate(snip.text, left)
                if text:
                    chosen.append(replace(snip, text=text, tokens=request.tokens.count(text)))
            break
        return Context(snippets=chosen, budget=request.budget, packer=self.name)
