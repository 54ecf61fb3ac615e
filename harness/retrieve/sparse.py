"""Sparse retrieval: BM25 (``harness.retrieve.bm25``) over each question's documents or an open corpus.

The settings are the dense retriever's: ``distractor`` ranks each question's own documents (an index per
question, so idf is the pool's), ``open`` one index over the union of every question's documents
(``harness.retrieve.corpus``, deduplicated as the dense retriever does), cached on disk. BM25 scores the text
the encoder embeds (``retriever.embed_title``).

A pool carries embeddings whatever ranked it: the stages after retrieval (diversifiers, packers, trees,
injected copies) work on vectors, so the retriever's encoder embeds the passages it retrieved and the question,
exactly as a dense pool's are (the same texts, the same embedding cache).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from harness.core.types import Document, Example, Pool
from harness.retrieve.bm25 import EMPTY_CORPUS, BM25Index, BM25Settings, corpus_index, tokenize
from harness.retrieve.corpus import (
    OPEN_POOL_SIZE,
    OpenCorpus,
    check_retrieval,
    document_text,
    make_candidate,
    open_corpus,
    top_by_score,
)
from harness.retrieve.dense import check_embed_title, embeds_title

log = logging.getLogger(__name__)


class SparseRetriever:
    def __init__(
        self,
        encoder,
        setting: str = "distractor",
        pool_size: int | None = None,
        embed_title: bool = True,
        bm25: Mapping[str, Any] | None = None,
        cache_dir: str | None = None,
    ) -> None:
        check_embed_title(encoder, embed_title)
        check_retrieval(setting, pool_size)
        self.encoder = encoder
        self.setting = setting
        self.pool_size = pool_size
        self.embed_title = bool(embed_title)
        self.settings = BM25Settings.of(bm25)
        self.cache_dir = cache_dir

    def retrieve(self, examples: list[Example]) -> list[Pool]:
        corpus = open_corpus(examples) if self.setting == "open" else None
        return assemble_pools(examples, self.bm25_scores(examples, corpus), corpus, self.pool_size, self.encoder)

    def bm25_scores(self, examples: Sequence[Example], corpus: OpenCorpus | None) -> list[np.ndarray]:
        """Each question's BM25 score for every document it could retrieve: its own (``corpus`` None) or the
        open corpus's, in that collection's order."""
        settings = self.settings
        queries = tokenize(settings, [ex.question for ex in examples])
        if corpus is not None:
            texts = [document_text(doc, self.embed_title) for doc in corpus.documents]
            index = corpus_index(settings, texts, self.cache_dir)
            if index.model is None:
                raise ValueError(f"retriever.setting=open: {EMPTY_CORPUS}")
            log.info("open BM25 retrieval: %d documents indexed", len(texts))
            return [index.scores(query) for query in queries]
        # Every question's documents tokenized in one call; each question's index over its own documents.
        flat = tokenize(settings, [document_text(doc, self.embed_title) for ex in examples for doc in ex.documents])
        scores, offset = [], 0
        for ex, query in zip(examples, queries, strict=True):
            tokens = flat[offset : offset + len(ex.documents)]
            offset += len(ex.documents)
            scores.append(BM25Index.build(settings, tokens).scores(query) if tokens else np.zeros(0))
        return scores


def assemble_pools(
    examples: Sequence[Example],
    scores: Sequence[np.ndarray],
    corpus: OpenCorpus | None,
    pool_size: int | None,
    encoder,
    vectors: Callable[[int, np.ndarray], np.ndarray] | None = None,
    queries: np.ndarray | None = None,
) -> list[Pool]:
    """Each question's pool: the ``pool_size`` best-scored of its documents (``corpus`` None: all of them) or of
    the open corpus (100 when null), highest first, the earlier document first among equal scores.

    The embeddings are ``vectors(question_index, chosen)`` when given (rows of vectors already computed), else
    the encoder's for the chosen passages, all questions' in one batch; ``queries`` likewise, when the caller
    has encoded the questions already."""
    if queries is None:
        queries = encoder.encode_queries([ex.question for ex in examples])
    chosen_per_question, texts = [], []
    for ex, score in zip(examples, scores, strict=True):
        documents: Sequence[Document] = corpus.documents if corpus is not None else ex.documents
        top = pool_size or (OPEN_POOL_SIZE if corpus is not None else len(documents))
        chosen = top_by_score(score, top)
        chosen_per_question.append(chosen)
        if vectors is None:
            texts += [document_text(documents[i], embeds_title(encoder)) for i in chosen]
    embedded = encoder.encode_documents(texts) if texts else np.zeros((0, queries.shape[1]), np.float32)
    pools, offset = [], 0
    for qi, (ex, score, chosen) in enumerate(zip(examples, scores, chosen_per_question, strict=True)):
        if vectors is not None:
            rows = vectors(qi, chosen)
        else:
            rows = embedded[offset : offset + len(chosen)]
            offset += len(chosen)
        if corpus is not None:
            candidates = corpus.candidates(chosen, score[chosen], ex.question_id)
        else:
            candidates = [make_candidate(ex.documents[i], ex.documents[i].doc_id, score[i]) for i in chosen]
        pools.append(Pool(ex, candidates, np.asarray(rows, dtype=np.float32), queries[qi]))
    return pools
