"""Per-request arrays the selection packers share: costs, documents, ranks, query-term incidence."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from harness.pack.base import PackingRequest
from harness.pack.lexical import (
    content_terms,
    query_term_incidence,
    relevance_from_incidence,
)


@dataclass
class SnippetFeatures:
    costs: np.ndarray  # (n,) int64 reader tokens
    doc_codes: np.ndarray  # (n,) int64: snippets of one candidate (source document) share a code
    ranks: np.ndarray  # (n,) int64 candidate rank
    positions: np.ndarray  # (n,) int64 sentence position inside the candidate
    query_terms: frozenset[str]
    incidence: np.ndarray  # (n, q) bool: snippet contains query term (columns in sorted term order)
    lexical: np.ndarray  # (n,) float64 fraction of query terms present

    @property
    def n(self) -> int:
        return int(self.costs.size)


def snippet_features(request: PackingRequest, stem: bool = True) -> SnippetFeatures:
    snippets = request.snippets
    query_terms = content_terms(request.question, stem)
    terms = [content_terms(s.text, stem) for s in snippets]
    incidence = query_term_incidence(query_terms, terms)
    codes: dict[str, int] = {}  # document codes in order of first appearance
    numbers = np.array(
        [(s.tokens, codes.setdefault(s.cand_id, len(codes)), s.rank, s.position) for s in snippets], dtype=np.int64
    ).reshape(len(snippets), 4)
    return SnippetFeatures(
        costs=numbers[:, 0].copy(),
        doc_codes=numbers[:, 1].copy(),
        ranks=numbers[:, 2].copy(),
        positions=numbers[:, 3].copy(),
        query_terms=query_terms,
        incidence=incidence,
        lexical=relevance_from_incidence(incidence),
    )


def check_max_snippets(owner: str, max_snippets: int | None) -> int | None:
    if max_snippets is None:
        return None
    if int(max_snippets) < 1:
        raise ValueError(f"packer {owner!r}: max_snippets must be >= 1 or null, got {max_snippets}")
    return int(max_snippets)
