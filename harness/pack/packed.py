"""Naive top-k packing: concatenate snippets in retrieval-rank order until the budget is hit.

What happens at the first snippet that does not fit (a *misfit*) is the ``misfit`` policy:

* ``truncate_last`` (the papers' top-k-and-truncate baseline): cut the misfit to the tokens left and stop.
  The cut falls on a token boundary that decodes to whole characters; the fragment is marked
  ``Snippet.truncated``, so it reaches the reader but does not count as its document contributing a
  snippet (see ``harness.metrics.context.gold_doc_coverage``).
* ``stop_at_first_misfit``: stop before the misfit (RAPTOR's collapsed tree: whole units only).
* ``skip_misfits``: skip every misfit and keep walking the ranking (first fit).

Every variant is costed by ``harness.pack.budget`` (snippet tokens plus one per separator), so their
contexts are comparable token for token. ``Context.extra`` records the policy, the packed cost and the
fragment's length in reader tokens (0 when the context ends in a whole unit).
"""

from __future__ import annotations

from dataclasses import replace

from harness.core.types import Context
from harness.pack.base import Packer, PackingRequest
from harness.pack.budget import addable, packed_cost, room

MISFIT_POLICIES = ("truncate_last", "stop_at_first_misfit", "skip_misfits")


class TopKTruncatePacker(Packer):
    """Walks candidates in retrieval rank order and their sentences in reading order."""

    def __init__(self, name: str = "packed", misfit: str = "truncate_last", truncate_last: bool | None = None) -> None:
        super().__init__(name)
        if truncate_last is not None:  # the older boolean spelling: false meant stop at the first misfit
            misfit = "truncate_last" if truncate_last else "stop_at_first_misfit"
        if misfit not in MISFIT_POLICIES:
            raise ValueError(f"packer {name!r}: misfit must be one of {', '.join(MISFIT_POLICIES)}, got {misfit!r}")
        self.misfit = misfit

    def pack(self, request: PackingRequest) -> Context:
        chosen = []
        fragment_tokens = 0
        for snip in sorted(request.snippets, key=lambda s: (s.rank, s.position)):
            costs = [s.tokens for s in chosen]
            if addable(costs, [snip.tokens], request.budget)[0]:
                chosen.append(snip)
                continue
            if self.misfit == "skip_misfits":
                continue
            if self.misfit == "truncate_last":
                left = room(costs, request.budget)
                text = request.tokens.truncate(snip.text, left) if left > 0 else ""
                if text:
                    fragment_tokens = request.tokens.count(text)
                    chosen.append(replace(snip, text=text, tokens=fragment_tokens, truncated=True))
            break
        extra = {
            "misfit": self.misfit,
            "packed_cost": packed_cost([s.tokens for s in chosen]),
            "fragment_tokens": fragment_tokens,
        }
        return Context(snippets=chosen, budget=request.budget, packer=self.name, extra=extra)
