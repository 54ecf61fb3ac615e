"""Typed records that move between pipeline stages.

Every stage consumes and returns these records only; no stage reaches into another's internals.
Embeddings travel beside the records as NumPy arrays (rows L2-normalised) so that selection
kernels stay vectorised.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass(frozen=True)
class Document:
    """One passage a question can draw on (a Wikipedia paragraph, a paper section, a chunk)."""

    doc_id: str
    title: str
    sentences: tuple[str, ...]
    # For a chunk of a longer text: the index of the paragraph each sentence came from (QASPER's evidence is
    # given as paragraphs); empty for a document that is one paragraph.
    sentence_paragraphs: tuple[int, ...] = ()

    @property
    def text(self) -> str:
        return " ".join(s.strip() for s in self.sentences if s.strip())


@dataclass(frozen=True)
class Example:
    """A question in canonical form, whatever file layout it came from."""

    question_id: str
    question: str
    answers: tuple[str, ...]  # the first is the reference answer, the rest are aliases
    gold_doc_ids: tuple[str, ...]
    documents: tuple[Document, ...]
    hops: int = 1  # evidence count h: how many gold documents the question needs
    qtype: str = ""
    split: str = "test"
    dataset: str = ""
    metadata: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)

    def document(self, doc_id: str) -> Document:
        for doc in self.documents:
            if doc.doc_id == doc_id:
                return doc
        raise KeyError(f"question {self.question_id!r} has no document {doc_id!r}")


@dataclass(frozen=True)
class Candidate:
    """A retrievable unit in a question's pool: a document, a chunk or a summary-tree node.

    ``source_ids`` are the original documents the text comes from (a summary node has several;
    a near-duplicate copy keeps its source's id), so diagnostics credit gold evidence correctly.
    """

    cand_id: str
    text: str
    source_ids: tuple[str, ...]
    title: str = ""
    sentences: tuple[str, ...] = ()
    score: float = 0.0  # similarity to the question under the retriever's encoder
    kind: str = "document"  # document | chunk | summary | copy
    layer: int = 0  # a summary node's tree layer (1 = summaries of leaves); 0 for every other kind

    def units(self) -> tuple[str, ...]:
        """The candidate's text split into sentence units (the text itself when unsplit)."""
        return self.sentences if self.sentences else (self.text,)


@dataclass
class Pool:
    """A question's ranked candidates, their embeddings and the question's embedding."""

    example: Example
    candidates: list[Candidate]
    embeddings: np.ndarray  # (m, d) float32, rows L2-normalised, aligned with candidates
    query_embedding: np.ndarray  # (d,) float32, L2-normalised

    def __post_init__(self) -> None:
        if len(self.candidates) != len(self.embeddings):
            raise ValueError(
                f"pool for {self.example.question_id!r}: {len(self.candidates)} candidates "
                f"but {len(self.embeddings)} embeddings"
            )

    def subset(self, indices) -> Pool:
        idx = [int(i) for i in indices]
        return Pool(
            example=self.example,
            candidates=[self.candidates[i] for i in idx],
            embeddings=self.embeddings[idx] if idx else self.embeddings[:0],
            query_embedding=self.query_embedding,
        )


@dataclass(frozen=True)
class Snippet:
    """A piece of text the packer may place in the reader's context, with its reader-token cost."""

    text: str
    cand_id: str
    source_ids: tuple[str, ...]
    tokens: int
    title: str = ""
    position: int = 0  # sentence index inside its candidate (keeps reading order)
    rank: int = 0  # rank of its candidate in the pool
    # A token prefix of a unit cut to fit the budget: the reader sees it, but it does not count as its
    # document contributing a snippet (gold coverage credits whole units only).
    truncated: bool = False


@dataclass
class Context:
    """What the reader sees: ordered snippets within the budget."""

    snippets: list[Snippet]
    budget: int | None
    packer: str
    tokens: int = 0  # reader tokens of the rendered context (set by the pipeline)
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def source_ids(self) -> set[str]:
        return {s for snip in self.snippets for s in snip.source_ids}
