"""Candidate snippets: the units a packer chooses from, each costed in the reader's tokenizer."""

from __future__ import annotations

from harness.core.protocols import TokenMeasure
from harness.core.types import Pool, Snippet

SEPARATOR = "\n"  # snippets are rendered one per line; a separator costs one token in every budget check


def make_snippets(pool: Pool, tokens: TokenMeasure, unit: str = "sentence", window: int = 2) -> list[Snippet]:
    """Split each candidate into snippets.

    unit = ``sentence`` (one snippet per sentence), ``window`` (non-overlapping runs of ``window`` sentences)
    or ``candidate`` (the whole candidate text).
    """
    if unit not in ("sentence", "window", "candidate"):
        raise ValueError(f"snippets.unit must be sentence, window or candidate, got {unit!r}")
    if unit == "window" and window < 1:
        raise ValueError(f"snippets.window must be >= 1, got {window}")
    pieces: list[tuple[str, int, int, object]] = []
    for rank, cand in enumerate(pool.candidates):
        if unit == "candidate":
            units = [cand.text]
        elif unit == "window":
            sents = list(cand.units())
            units = [" ".join(sents[i : i + window]) for i in range(0, len(sents), window)]
        else:
            units = list(cand.units())
        for position, text in enumerate(u.strip() for u in units):
            if text:
                pieces.append((text, rank, position, cand))
    costs = tokens.count_many([p[0] for p in pieces])
    return [
        Snippet(
            text=text,
            cand_id=cand.cand_id,
            source_ids=cand.source_ids,
            tokens=cost,
            title=cand.title,
            position=position,
            rank=rank,
        )
        for (text, rank, position, cand), cost in zip(pieces, costs, strict=False)
    ]


def render_context(snippets: list[Snippet]) -> str:
    return SEPARATOR.join(s.text for s in snippets)
