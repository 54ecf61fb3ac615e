"""Dense retrieval: a FAISS inner-product index over L2-normalised bi-encoder vectors.

Two settings:
- ``distractor``: each question's pool is ranked from its own documents (HotpotQA distractor, MuSiQue, 2Wiki).
- ``open``: one index over the union of every question's documents (deduplicated by content), searched
  per question; a retrieved document keeps the question's own id when it is one of the question's documents,
  so gold identity survives the merge.
"""

from __future__ import annotations

import logging

import faiss
import numpy as np
from tqdm.auto import tqdm

from harness.cache import stable_hash
from harness.core.types import Candidate, Document, Example, Pool
from harness.retrieve.encoder import Encoder

log = logging.getLogger(__name__)


def document_text(doc: Document, embed_title: bool = True) -> str:
    """What the encoder sees for a document: "title: text", or the text alone with ``embed_title=False``."""
    return f"{doc.title}: {doc.text}" if doc.title and embed_title else doc.text


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


def _candidate(doc: Document, source_id: str, score: float) -> Candidate:
    return Candidate(
        cand_id=source_id,
        text=doc.text,
        source_ids=(source_id,),
        title=doc.title,
        sentences=tuple(s.strip() for s in doc.sentences if s.strip()),
        score=float(score),
        kind="document",
    )


class DenseRetriever:
    def __init__(
        self, encoder: Encoder, setting: str = "distractor", pool_size: int | None = None, embed_title: bool = True
    ) -> None:
        if embeds_title(encoder) != bool(embed_title):
            raise ValueError(
                f"retriever.embed_title={embed_title} but retriever.encoder.embed_title={embeds_title(encoder)}: "
                "set retriever.embed_title only (the encoder follows it)"
            )
        self.embed_title = bool(embed_title)
        if setting not in ("distractor", "open"):
            raise ValueError(f"retriever.setting must be 'distractor' or 'open', got {setting!r}")
        if pool_size is not None and pool_size < 1:
            raise ValueError(f"retriever.pool_size must be >= 1 or null, got {pool_size}")
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
                        _candidate(ex.documents[i], ex.documents[i].doc_id, s)
                        for i, s in zip(chosen, scores[0], strict=False)
                    ],
                    embeddings=doc_vectors[chosen],
                    query_embedding=query,
                )
            )
        return pools

    def _retrieve_open(self, examples: list[Example], queries: np.ndarray) -> list[Pool]:
        corpus: dict[str, Document] = {}
        owners: dict[str, dict[str, str]] = {}  # content key -> {question_id: that question's doc id}
        seen_collections: set[int] = set()
        for ex in examples:
            # A corpus shared by reference between questions (BEIR) is indexed once; its ids are global.
            if id(ex.documents) in seen_collections:
                continue
            seen_collections.add(id(ex.documents))
            for doc in ex.documents:
                key = stable_hash(doc.title, doc.text)
                corpus.setdefault(key, doc)
                owners.setdefault(key, {})[ex.question_id] = doc.doc_id
        keys = list(corpus)
        vectors = self.encoder.encode_documents([document_text(corpus[k], self.embed_title) for k in keys])
        top = self.pool_size or 100
        scores, order = inner_product_search(vectors, queries, top)
        log.info("open retrieval: %d documents indexed, pool size %d", len(keys), top)
        pools = []
        for qi, ex in enumerate(examples):
            chosen = order[qi][order[qi] >= 0]
            candidates = []
            for i, s in zip(chosen, scores[qi], strict=False):
                key = keys[i]
                owner = owners[key]
                source_id = owner.get(ex.question_id) or next(iter(owner.values()))
                candidates.append(_candidate(corpus[key], source_id, s))
            pools.append(Pool(ex, candidates, vectors[chosen], queries[qi]))
        return pools
