"""What every retriever shares: the candidate a retrieved document becomes, the open corpus (one collection
over every question's documents, deduplicated by content) and the ranking of a score vector.

The open corpus is built once here for the dense, sparse and hybrid retrievers alike, so the three index the
same documents in the same order and a retrieved document is credited the same way whichever ranked it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from harness.cache import stable_hash
from harness.core.types import Candidate, Document, Example

SETTINGS = ("distractor", "open")
# Candidates an open-setting pool keeps when retriever.pool_size is null.
OPEN_POOL_SIZE = 100


def check_retrieval(setting: str, pool_size: int | None) -> None:
    """ValueError naming the key when the retrieval setting or pool size is invalid (every retriever's)."""
    if setting not in SETTINGS:
        raise ValueError(f"retriever.setting must be 'distractor' or 'open', got {setting!r}")
    if pool_size is not None and pool_size < 1:
        raise ValueError(f"retriever.pool_size must be >= 1 or null, got {pool_size}")


def document_text(doc: Document, embed_title: bool = True) -> str:
    """What the encoder sees for a document: "title: text", or the text alone with ``embed_title=False``
    (BM25 indexes the same text)."""
    return f"{doc.title}: {doc.text}" if doc.title and embed_title else doc.text


def make_candidate(doc: Document, source_id: str, score: float) -> Candidate:
    """A retrieved document as a pool candidate, credited to ``source_id``."""
    return Candidate(
        cand_id=source_id,
        text=doc.text,
        source_ids=(source_id,),
        title=doc.title,
        sentences=tuple(s.strip() for s in doc.sentences if s.strip()),
        score=float(score),
        kind="document",
    )


@dataclass
class OpenCorpus:
    """Every distinct document of a question set, in first-seen order, and who owns each.

    A document is keyed by its title and text, so one paragraph carried by several questions (under their own
    ids) is indexed once; ``owners[i]`` maps each question holding document ``i`` to its id there.
    """

    documents: list[Document] = field(default_factory=list)
    owners: list[dict[str, str]] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.documents)

    def source_id(self, index: int, question_id: str) -> str:
        """The id document ``index`` is credited under in ``question_id``'s pool: the question's own id when it
        holds the document (so gold identity survives the merge), else the first owner's."""
        owner = self.owners[index]
        return owner.get(question_id) or next(iter(owner.values()))

    def candidates(self, order: Sequence[int], scores: Sequence[float], question_id: str) -> list[Candidate]:
        """The documents at ``order`` as ``question_id``'s candidates, with their scores."""
        return [
            make_candidate(self.documents[i], self.source_id(int(i), question_id), s)
            for i, s in zip(order, scores, strict=True)
        ]


def open_corpus(examples: Sequence[Example]) -> OpenCorpus:
    """The union of every question's documents, deduplicated by content (see :class:`OpenCorpus`)."""
    corpus = OpenCorpus()
    position: dict[str, int] = {}
    seen_collections: set[int] = set()
    for ex in examples:
        # A corpus shared by reference between questions (BEIR) is indexed once; its ids are global.
        if id(ex.documents) in seen_collections:
            continue
        seen_collections.add(id(ex.documents))
        for doc in ex.documents:
            key = stable_hash(doc.title, doc.text)
            if key not in position:
                position[key] = len(corpus.documents)
                corpus.documents.append(doc)
                corpus.owners.append({})
            corpus.owners[position[key]][ex.question_id] = doc.doc_id
    return corpus


def top_by_score(scores: np.ndarray, top: int) -> np.ndarray:
    """The indices of the ``top`` highest scores, highest first, the lower index first among equal scores."""
    scores = np.asarray(scores)
    top = min(int(top), len(scores))
    if top <= 0:
        return np.empty(0, dtype=np.intp)
    if top < len(scores):
        # Only the candidates at or above the top-th score can be chosen; ranking those alone is exact.
        threshold = np.partition(scores, len(scores) - top)[len(scores) - top]
        within = np.flatnonzero(scores >= threshold)
    else:
        within = np.arange(len(scores))
    order = within[np.argsort(-scores[within], kind="stable")]
    return order[:top]


def ranks(scores: np.ndarray) -> np.ndarray:
    """Each candidate's 1-based rank under ``scores`` (highest first, the lower index first among ties)."""
    order = np.argsort(-np.asarray(scores), kind="stable")
    out = np.empty(len(order), dtype=np.int64)
    out[order] = np.arange(1, len(order) + 1)
    return out
