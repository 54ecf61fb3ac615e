"""Dense retrieval: a FAISS inner-product index over L2-normalised bi-encoder vectors.

Two settings:
- ``distractor``: each question's pool is ranked from its own documents (HotpotQA distractor, MuSiQue, 2Wiki).
- ``open``: one index over the union of every question's documents (deduplicated by content,
  ``harness.retrieve.corpus``), searched per question; a retrieved document keeps the question's own id when
  it is one of the question's documents, so gold identity survives the merge.
"""

from __future__ import annotations

import logging

import faiss
import numpy as np
from tqdm.auto import tqdm

from harness.core.types import Candidate, Example, Pool
from harness.retrieve.corpus import (  # noqa: F401 - document_text is this module's public name too
    OPEN_POOL_SIZE,
    check_retrieval,
    document_text,
    make_candidate,
    open_corpus,
)
from harness.retrieve.encoder import Encoder

log = logging.getLogger(__name__)


def candidate_text(candidate: Candidate, embed_title: bool = True) -> str:
    """The same view for a candidate (a copy or a chunk embeds like a document); with the title it is also
    what a whole-candidate context shows the reader and what a cross-encoder scores."""
    return f"{candidate.title}: {candidate.text}" if candidate.title and embed_title else candidate.text


def embeds_title(encoder) -> bool:
    """Whether texts embedded with ``encoder`` carry their title (``retriever.embed_title``, default true).

    Every stage that embeds a passage (retrieval, injected copies, overlapping chunks, tree leaves) asks
    the encoder, so a copy is embedded exactly like its source. The embedding cache needs no extra key:
    it is keyed by the embedded text itself, which differs with and without the title.
    """
    return bool(getattr(encoder, "embed_title", True))


def check_embed_title(encoder, embed_title: bool) -> None:
    """ValueError when ``retriever.embed_title`` and the encoder's disagree (every retriever embeds passages)."""
    if embeds_title(encoder) != bool(embed_title):
        raise ValueError(
            f"retriever.embed_title={embed_title} but retriever.encoder.embed_title={embeds_title(encoder)}: "
            "set retriever.embed_title only (the encoder follows it)"
        )


# From this many vectors an exact search moves to the GPUs (when faiss has GPU support and CUDA is visible):
# below it, copying the index to the devices costs more than the search (a distractor pool holds ten).
GPU_SEARCH_MIN_VECTORS = 20_000


def faiss_gpus() -> int:
    """The GPUs this faiss build can search on: 0 for faiss-cpu (it has no ``get_num_gpus``) and where
    ``CUDA_VISIBLE_DEVICES`` hides them."""
    count = getattr(faiss, "get_num_gpus", None)
    return int(count()) if callable(count) else 0


def search_on_gpu(n_vectors: int, gpus: int) -> bool:
    return gpus > 0 and n_vectors >= GPU_SEARCH_MIN_VECTORS


def inner_product_search(vectors: np.ndarray, queries: np.ndarray, top: int) -> tuple[np.ndarray, np.ndarray]:
    """Exact top-``top`` inner-product search; returns (scores, indices), each (n_queries, top). A large
    index is searched on every visible GPU when the installed faiss has GPU support (an exact flat index
    gives the same neighbours there)."""
    index = faiss.IndexFlatIP(vectors.shape[1])
    index.add(np.ascontiguousarray(vectors, dtype=np.float32))
    if search_on_gpu(len(vectors), faiss_gpus()):
        index = faiss.index_cpu_to_all_gpus(index)  # type: ignore[attr-defined]
    return index.search(np.ascontiguousarray(queries, dtype=np.float32), min(top, len(vectors)))


class DenseRetriever:
    def __init__(
        self, encoder: Encoder, setting: str = "distractor", pool_size: int | None = None, embed_title: bool = True
    ) -> None:
        check_embed_title(encoder, embed_title)
        self.embed_title = bool(embed_title)
        check_retrieval(setting, pool_size)
        self.encoder = encoder
        self.setting = setting
        self.pool_size = pool_size

    def retrieve(self, examples: list[Example]) -> list[Pool]:
        queries = self.encoder.encode_queries([ex.question for ex in examples])
        if self.setting == "open":
            return self._retrieve_open(examples, queries)
        return self._retrieve_distractor(examples, queries)

    def _retrieve_distractor(self, examples: list[Example], queries: np.ndarray) -> list[Pool]:
        # Embed every document of every question in one batch: far faster than per question.
        texts = [document_text(doc, self.embed_title) for ex in examples for doc in ex.documents]
        vectors = self.encoder.encode_documents(texts)
        pools, offset = [], 0
        for ex, query in zip(tqdm(examples, desc="retrieve", leave=False, delay=2.0), queries, strict=False):
            n = len(ex.documents)
            doc_vectors = vectors[offset : offset + n]
            offset += n
            if n == 0:  # a question with no documents (possible in open-domain files) gets an empty pool
                pools.append(Pool(ex, [], np.zeros((0, queries.shape[1]), dtype=np.float32), query))
                continue
            scores, order = inner_product_search(doc_vectors, query[None], self.pool_size or n)
            chosen = order[0][order[0] >= 0]
            pools.append(
                Pool(
                    example=ex,
                    candidates=[
                        make_candidate(ex.documents[i], ex.documents[i].doc_id, s)
                        for i, s in zip(chosen, scores[0], strict=False)
                    ],
                    embeddings=doc_vectors[chosen],
                    query_embedding=query,
                )
            )
        return pools

    def _retrieve_open(self, examples: list[Example], queries: np.ndarray) -> list[Pool]:
        corpus = open_corpus(examples)
        vectors = self.encoder.encode_documents([document_text(doc, self.embed_title) for doc in corpus.documents])
        top = self.pool_size or OPEN_POOL_SIZE
        scores, order = inner_product_search(vectors, queries, top)
        log.info("open retrieval: %d documents indexed, pool size %d", len(corpus), top)
        pools = []
        for qi, ex in enumerate(examples):
            chosen = order[qi][order[qi] >= 0]
            candidates = corpus.candidates(chosen, scores[qi][: len(chosen)], ex.question_id)
            pools.append(Pool(ex, candidates, vectors[chosen], queries[qi]))
        return pools
