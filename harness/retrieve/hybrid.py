"""Hybrid retrieval: the bi-encoder's and BM25's scores of the same documents, fused.

Both retrievers score every document a question could retrieve (its own in the ``distractor`` setting, the
whole open corpus in ``open``), so the fusion (``harness.retrieve.fusion``: ``rrf`` or ``weighted``) never
meets a document one of them did not rank.

A candidate's ``score`` is its fused score; the pool keeps the best ``pool_size`` (as the other retrievers do)
with the encoder's vectors, already computed for the dense scores. The fusion and its parameter are config
keys (``retriever.fusion``, ``retriever.rrf_k``, ``retriever.dense_weight``), so every row names them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from harness.core.types import Example, Pool
from harness.retrieve.corpus import OpenCorpus, document_text, open_corpus
from harness.retrieve.fusion import fusion_problems, reciprocal_rank_fusion, weighted_fusion
from harness.retrieve.sparse import SparseRetriever, assemble_pools


class HybridRetriever:
    def __init__(
        self, encoder, fusion: str = "rrf", rrf_k: float = 60, dense_weight: float = 0.5, **sparse: Any
    ) -> None:
        # The BM25 side takes the sparse retriever's own options (setting, pool_size, embed_title, bm25,
        # cache_dir), checked there.
        self.sparse = SparseRetriever(encoder, **sparse)
        problems = fusion_problems(fusion, rrf_k, dense_weight)
        if problems:
            raise ValueError("; ".join(problems))
        self.encoder = encoder
        self.fusion, self.rrf_k, self.dense_weight = fusion, float(rrf_k), float(dense_weight)

    def fuse(self, dense: np.ndarray, sparse: np.ndarray) -> np.ndarray:
        if self.fusion == "rrf":
            return reciprocal_rank_fusion([dense, sparse], self.rrf_k)
        return weighted_fusion(dense, sparse, self.dense_weight)

    def retrieve(self, examples: list[Example]) -> list[Pool]:
        corpus = open_corpus(examples) if self.sparse.setting == "open" else None
        sparse = self.sparse.bm25_scores(examples, corpus)
        queries = self.encoder.encode_queries([ex.question for ex in examples])
        dense, vectors = self.dense_scores(examples, corpus, queries)
        fused = [self.fuse(d, s) for d, s in zip(dense, sparse, strict=True)]
        return assemble_pools(examples, fused, corpus, self.sparse.pool_size, self.encoder, vectors, queries)

    def dense_scores(
        self, examples: Sequence[Example], corpus: OpenCorpus | None, queries: np.ndarray
    ) -> tuple[list[np.ndarray], Callable[[int, np.ndarray], np.ndarray]]:
        """Each question's inner product with every document it could retrieve (the vectors are unit rows:
        cosine), and the look-up of the chosen documents' vectors."""
        title = self.sparse.embed_title
        if corpus is not None:
            matrix = self.encoder.encode_documents([document_text(doc, title) for doc in corpus.documents])
            scores = [np.asarray(matrix @ query, dtype=np.float64) for query in queries]
            return scores, lambda qi, chosen: matrix[chosen]
        flat = self.encoder.encode_documents([document_text(doc, title) for ex in examples for doc in ex.documents])
        bounds = np.cumsum([0] + [len(ex.documents) for ex in examples])
        per_question = [flat[start:end] for start, end in zip(bounds[:-1], bounds[1:], strict=True)]
        scores = [np.asarray(rows @ query, dtype=np.float64) for rows, query in zip(per_question, queries, strict=True)]
        return scores, lambda qi, chosen: per_question[qi][chosen]
