"""What RAPTOR and the dynamic tree share: settings, leaves, the tree cache and retrieval over nodes.

A tree is built over the question's whole document (``example.documents``: the chunks, in reading
order), not over the retrieved pool, so every question on a document shares one RAPTOR tree. Two
retrieval modes turn the tree into the pool the diversifier and packer see:

- ``collapsed`` (RAPTOR's default): every summary node joins the pool's own candidates and all are
  ranked by cosine similarity to the question. A packer with ``snippets.unit=candidate`` then packs
  whole nodes under the token budget: collapsed-tree retrieval under a cap.
- ``traversal``: from the top layer down, keep the ``traversal_top_k`` nodes most similar to the
  question among the children of the nodes kept one layer up; the pool is every node kept, ranked.

``expand`` returns, with each question's pool, the build facts that become ``tree.*`` row columns:
nodes per layer, construction seconds (leaf embedding, a preprocessing step shared with dense
retrieval, excluded), the LM calls and prompt tokens of the construction (``lm_calls``,
``lm_prompt_tokens``: cache misses of the LM; None for an LM without counters), whether the tree came
from the cache (a cached tree reports the seconds and LM work of its original build), and the tree's
cache key (questions on one document share it). Only caches live on the object; nothing about a
particular question does.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from harness.cache import TextStore
from harness.cache.fingerprint import code_fingerprint
from harness.core.protocols import ChatLM, TokenMeasure
from harness.core.types import Candidate, Pool
from harness.lm.base import build_chat_lm
from harness.retrieve.dense import document_text, embeds_title
from harness.text.sentences import split_sentences
from harness.text.tokens import WordCounter
from harness.tree.base import Tree, TreeServices
from harness.tree.clustering import ClusteringConfig
from harness.tree.summary_tree import (
    SUMMARY_PROMPT,
    BuildSettings,
    SummaryTree,
    TreeBuilder,
    TreeNode,
)

log = logging.getLogger(__name__)

RETRIEVAL_MODES = ("collapsed", "traversal")
CACHE_FILE = "trees.sqlite"


def identity_of(component: Any) -> str:
    """A stable label for what a model computes (its ``identity`` when it has one)."""
    return str(getattr(component, "identity", None) or f"{type(component).__module__}.{type(component).__qualname__}")


class RecursiveSummaryTree(Tree):
    def __init__(
        self,
        name: str,
        lm: Any = None,
        retrieval: str = "collapsed",
        traversal_top_k: int = 5,
        reduction_dim: int = 10,
        reducer: str = "umap",
        threshold: float = 0.1,
        max_clusters: int = 50,
        covariance_type: str = "full",
        reg_covar: float = 1e-6,
        local_clustering: bool = True,
        local_neighbors: int = 10,
        max_layers: int = 5,
        min_nodes: int | None = None,
        max_cluster_tokens: int | None = 3500,
        summary_max_tokens: int = 100,
        summary_input_tokens: int | None = None,
        summary_prompt: str = SUMMARY_PROMPT,
        cache_dir: str | Path | None = None,
    ) -> None:
        super().__init__(name)
        if retrieval not in RETRIEVAL_MODES:
            raise ValueError(f"tree {name!r}: retrieval must be one of {RETRIEVAL_MODES}, got {retrieval!r}")
        if traversal_top_k < 1:
            raise ValueError(f"tree {name!r}: traversal_top_k must be >= 1, got {traversal_top_k}")
        self.retrieval = retrieval
        self.traversal_top_k = int(traversal_top_k)
        clustering = ClusteringConfig(
            reduction_dim=reduction_dim,
            reducer=reducer,
            threshold=threshold,
            max_clusters=max_clusters,
            covariance_type=covariance_type,
            reg_covar=reg_covar,
            local_clustering=local_clustering,
            local_neighbors=local_neighbors,
        )
        self.settings = BuildSettings(
            clustering=clustering,
            max_layers=max_layers,
            min_nodes=min_nodes,
            max_cluster_tokens=max_cluster_tokens,
            summary_max_tokens=summary_max_tokens,
            summary_input_tokens=summary_input_tokens,
            summary_prompt=summary_prompt,
        )
        self._lm_spec = lm
        self._lm = None
        self.cache = TextStore(Path(cache_dir) / CACHE_FILE, table="summary_trees") if cache_dir else None
        self._memory: dict[str, dict] = {}
        self._summary_embeddings: dict[str, list[np.ndarray]] = {}  # per tree key, this process only

    # -- services -----------------------------------------------------------------------------------

    def language_model(self, services: TreeServices | None = None) -> ChatLM:
        """The tree's own LM (config or object)."""
        if self._lm is None:
            self._lm = build_chat_lm(self._lm_spec)
        return self._lm

    @staticmethod
    def measure(services: TreeServices) -> TokenMeasure:
        """Counts and truncates text: the reader's tokenizer when given, else whitespace words."""
        return services.tokens if services.tokens is not None else WordCounter()

    def builder(self, services: TreeServices) -> TreeBuilder:
        return TreeBuilder(
            self.language_model(services), services.encoder, self.measure(services), self.settings, services.seed
        )

    # -- leaves -------------------------------------------------------------------------------------

    @staticmethod
    def leaves(pool: Pool, services: TreeServices) -> tuple[list[TreeNode], np.ndarray]:
        """The document's chunks as layer-0 nodes with their embeddings: the retriever's own vectors
        for chunks in the pool, the encoder (same document view) for any chunk the pool left out."""
        docs = pool.example.documents
        nodes = [TreeNode(0, i, doc.text, (), (doc.doc_id,)) for i, doc in enumerate(docs)]
        dim = len(pool.query_embedding)
        vectors = np.zeros((len(docs), dim), dtype=np.float32)
        in_pool = {}
        for i, cand in enumerate(pool.candidates):
            if cand.kind == "document":
                in_pool.setdefault(cand.cand_id, i)
        missing = [i for i, doc in enumerate(docs) if doc.doc_id not in in_pool]
        for i, doc in enumerate(docs):
            if doc.doc_id in in_pool:
                vectors[i] = pool.embeddings[in_pool[doc.doc_id]]
        if missing:
            view = embeds_title(services.encoder)
            vectors[missing] = services.encoder.encode_documents([document_text(docs[i], view) for i in missing])
        return nodes, vectors

    def base_key(self, leaves: list[TreeNode], services: TreeServices) -> list[Any]:
        return [
            type(self).__name__,
            code_fingerprint("tree"),
            [n.text for n in leaves],
            self.settings.key(),
            identity_of(self.language_model(services)),
            identity_of(services.encoder),
            getattr(self.measure(services), "name", type(self.measure(services)).__name__),
            int(services.seed),
        ]

    # -- cache --------------------------------------------------------------------------------------

    def cached(self, key: str) -> dict | None:
        if key in self._memory:
            return self._memory[key]
        if self.cache is not None:
            found = self.cache.get_texts([key])
            if key in found:
                self._memory[key] = found[key]  # type: ignore[assignment]
                return found[key]  # type: ignore[return-value]
        return None

    def summary_embeddings(self, key: str, tree: SummaryTree, services: TreeServices) -> list[np.ndarray]:
        """Embeddings of layers 1.. of a cached tree (kept in memory after the first encoding)."""
        if key not in self._summary_embeddings:
            self._summary_embeddings[key] = [
                np.asarray(services.encoder.encode_documents([n.text for n in layer]), dtype=np.float32)
                for layer in tree.layers[1:]
            ]
        return self._summary_embeddings[key]

    def store(self, key: str, record: dict, layer_embeddings: list[np.ndarray] | None = None) -> None:
        if layer_embeddings is not None:
            self._summary_embeddings[key] = list(layer_embeddings[1:])
        self._memory[key] = record
        if self.cache is not None:
            self.cache.put_texts({key: record})

    # -- retrieval over a built tree ----------------------------------------------------------------

    def tree_pool(self, pool: Pool, tree: SummaryTree, layer_embeddings: list[np.ndarray]) -> Pool:
        if self.retrieval == "traversal":
            return self._traversal_pool(pool, tree, layer_embeddings)
        return self._collapsed_pool(pool, tree, layer_embeddings)

    @staticmethod
    def summary_candidate(node: TreeNode) -> Candidate:
        return Candidate(
            cand_id=f"tree:{node.layer}:{node.index}",
            text=node.text,
            source_ids=node.source_ids,
            title="",
            sentences=split_sentences(node.text),
            kind="summary",
            layer=node.layer,
        )

    @staticmethod
    def ranked(pool: Pool, candidates: list[Candidate], embeddings: np.ndarray) -> Pool:
        """Candidates rescored by cosine to the question, sorted by score (descending, stable)."""
        embeddings = np.asarray(embeddings, dtype=np.float32)
        scores = embeddings @ pool.query_embedding if len(candidates) else np.zeros(0, dtype=np.float32)
        order = np.argsort(-scores, kind="stable")
        return Pool(
            example=pool.example,
            candidates=[replace(candidates[i], score=float(scores[i])) for i in order],
            embeddings=embeddings[order],
            query_embedding=pool.query_embedding,
        )

    def _collapsed_pool(self, pool: Pool, tree: SummaryTree, layer_embeddings: list[np.ndarray]) -> Pool:
        nodes = tree.summary_nodes()
        if not nodes:
            return self.ranked(pool, list(pool.candidates), pool.embeddings)
        candidates = list(pool.candidates) + [self.summary_candidate(n) for n in nodes]
        embeddings = np.vstack([np.asarray(pool.embeddings, dtype=np.float32)] + list(layer_embeddings[1:]))
        return self.ranked(pool, candidates, embeddings)

    def _traversal_pool(self, pool: Pool, tree: SummaryTree, layer_embeddings: list[np.ndarray]) -> Pool:
        chosen = traverse(
            layer_embeddings,
            [[n.children for n in layer] for layer in tree.layers],
            pool.query_embedding,
            self.traversal_top_k,
        )
        in_pool = {}
        for i, cand in enumerate(pool.candidates):
            in_pool.setdefault(cand.cand_id, i)
        candidates, vectors = [], []
        for layer, index in chosen:
            node = tree.layers[layer][index]
            if layer == 0:
                doc_id = node.source_ids[0]
                if doc_id in in_pool:  # the retriever's own candidate, with its embedding
                    candidates.append(pool.candidates[in_pool[doc_id]])
                    vectors.append(pool.embeddings[in_pool[doc_id]])
                    continue
                doc = pool.example.document(doc_id)
                candidates.append(
                    Candidate(
                        doc_id,
                        doc.text,
                        (doc_id,),
                        doc.title,
                        tuple(s.strip() for s in doc.sentences if s.strip()),
                        kind="document",
                    )
                )
            else:
                candidates.append(self.summary_candidate(node))
            vectors.append(layer_embeddings[layer][index])
        dim = len(pool.query_embedding)
        return self.ranked(pool, candidates, np.vstack(vectors) if vectors else np.zeros((0, dim), np.float32))


def traverse(
    layer_embeddings: list[np.ndarray],
    layer_children: list[list[tuple[int, ...]]],
    query: np.ndarray,
    top_k: int,
) -> list[tuple[int, int]]:
    """RAPTOR's tree traversal: (layer, index) of the top-``top_k`` nodes of the top layer, then of the
    children of those, down to the leaves. Ties break towards the lower index."""
    chosen: list[tuple[int, int]] = []
    top = len(layer_embeddings) - 1
    frontier = np.arange(len(layer_embeddings[top]))
    for layer in range(top, -1, -1):
        if len(frontier) == 0:
            break
        scores = layer_embeddings[layer][frontier] @ query
        picked = frontier[np.argsort(-scores, kind="stable")[:top_k]]
        chosen.extend((layer, int(i)) for i in picked)
        if layer > 0:
            frontier = np.array(sorted({c for i in picked for c in layer_children[layer][i]}), dtype=np.int64)
    return chosen
