"""Recursive summary trees: cluster a layer's nodes, summarise each cluster with an LM, repeat.

Layer 0 holds the leaves (a document's chunks, in reading order). Each higher layer holds one
summary per cluster of the layer below; a summary's ``source_ids`` are the leaf documents under it.
Construction stops when a layer has too few nodes to cluster (``min_nodes``, RAPTOR's
``reduction_dimension + 1``), when clustering returns a single cluster (that summary is the root),
or after ``max_layers`` summary layers.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field

import numpy as np

from harness.core.protocols import ChatLM, TextEncoder, TokenMeasure
from harness.tree.clustering import (
    ClusteringConfig,
    cap_cluster_tokens,
    raptor_clusters,
)

log = logging.getLogger(__name__)

# RAPTOR's summarisation prompt.
SUMMARY_PROMPT = "Write a summary of the following, including as many key details as possible: {context}:"


@dataclass(frozen=True)
class TreeNode:
    layer: int
    index: int  # position inside its layer
    text: str
    children: tuple[int, ...]  # indices into the layer below (empty for leaves)
    source_ids: tuple[str, ...]  # leaf documents under the node


@dataclass
class SummaryTree:
    layers: list[list[TreeNode]]
    build_seconds: float = 0.0
    timings: dict[str, float] = field(default_factory=dict)
    empty_summaries: int = 0  # clusters whose summary came back empty (dropped)
    lm_calls: int | None = None  # prompts the LM generated (cache misses) while building; None: not counted
    lm_prompt_tokens: int | None = None  # their input tokens

    def nodes_per_layer(self) -> list[int]:
        return [len(layer) for layer in self.layers]

    def summary_nodes(self) -> list[TreeNode]:
        return [node for layer in self.layers[1:] for node in layer]

    def to_json(self) -> dict:
        return {
            "layers": [
                [{"text": n.text, "children": list(n.children), "source_ids": list(n.source_ids)} for n in layer]
                for layer in self.layers
            ],
            "build_seconds": self.build_seconds,
            "timings": self.timings,
            "empty_summaries": self.empty_summaries,
            "lm_calls": self.lm_calls,
            "lm_prompt_tokens": self.lm_prompt_tokens,
        }

    @classmethod
    def from_json(cls, data: dict) -> SummaryTree:
        layers = [
            [TreeNode(li, ni, n["text"], tuple(n["children"]), tuple(n["source_ids"])) for ni, n in enumerate(layer)]
            for li, layer in enumerate(data["layers"])
        ]
        return cls(
            layers,
            float(data["build_seconds"]),
            dict(data["timings"]),
            int(data.get("empty_summaries", 0)),
            data.get("lm_calls"),
            data.get("lm_prompt_tokens"),
        )


@dataclass(frozen=True)
class BuildSettings:
    clustering: ClusteringConfig = field(default_factory=ClusteringConfig)
    max_layers: int = 5  # RAPTOR's num_layers
    min_nodes: int | None = None  # a layer of at most this many nodes is not clustered (None: reduction_dim + 1)
    max_cluster_tokens: int | None = 3500  # RAPTOR's max_length_in_cluster
    summary_max_tokens: int = 100  # RAPTOR's summarization_length
    summary_input_tokens: int | None = None  # cap on a cluster's joined text sent to the LM
    summary_prompt: str = SUMMARY_PROMPT

    def __post_init__(self) -> None:
        if self.max_layers < 1:
            raise ValueError(f"max_layers must be >= 1, got {self.max_layers}")
        if self.min_nodes is not None and self.min_nodes < 0:
            raise ValueError(f"min_nodes must be >= 0 or null, got {self.min_nodes}")
        if self.summary_max_tokens < 1:
            raise ValueError(f"summary_max_tokens must be >= 1, got {self.summary_max_tokens}")
        if "{context}" not in self.summary_prompt:
            raise ValueError("summary_prompt must contain the {context} placeholder")

    @property
    def stop_at(self) -> int:
        return self.clustering.reduction_dim + 1 if self.min_nodes is None else self.min_nodes

    def key(self) -> dict:
        return {**asdict(self), "clustering": self.clustering.key(), "min_nodes": self.stop_at}


FirstLayer = Callable[[np.ndarray], list[np.ndarray]]

LMWork = tuple[int | None, int | None]


def lm_work(lm: ChatLM) -> LMWork:
    """The LM's running counters (``calls``, ``prompt_tokens``: see ``harness.lm.base``); None for a
    ChatLM that keeps no such counter."""
    calls, tokens = getattr(lm, "calls", None), getattr(lm, "prompt_tokens", None)
    return (calls if isinstance(calls, int) else None, tokens if isinstance(tokens, int) else None)


def lm_work_since(lm: ChatLM, before: LMWork) -> dict[str, int | None]:
    """``lm_calls`` and ``lm_prompt_tokens`` spent since ``before = lm_work(lm)``: the LM work of one
    tree, which row columns report (prompts answered from the LM's own cache cost nothing)."""
    after = lm_work(lm)
    calls, tokens = (None if a is None or b is None else a - b for a, b in zip(after, before, strict=True))
    return {"lm_calls": calls, "lm_prompt_tokens": tokens}


class TreeBuilder:
    """Builds one tree from leaves; ``measure`` counts and truncates text (a TokenCounter or WordCounter)."""

    def __init__(
        self, lm: ChatLM, encoder: TextEncoder, measure: TokenMeasure, settings: BuildSettings, seed: int = 0
    ) -> None:
        self.lm = lm
        self.encoder = encoder
        self.measure = measure
        self.settings = settings
        self.seed = int(seed)

    def build(
        self,
        leaves: Sequence[TreeNode],
        leaf_embeddings: np.ndarray,
        first_layer: FirstLayer | None = None,
    ) -> tuple[SummaryTree, list[np.ndarray]]:
        """The tree and each layer's node embeddings. ``first_layer`` replaces the BIC clustering of
        layer 1 (the dynamic tree seeds it with sub-questions); the same stopping rules apply."""
        settings = self.settings
        timings = {"cluster_seconds": 0.0, "summarize_seconds": 0.0, "embed_seconds": 0.0}
        layers: list[list[TreeNode]] = [list(leaves)]
        embeddings: list[np.ndarray] = [np.asarray(leaf_embeddings, dtype=np.float32)]
        empty = 0
        work = lm_work(self.lm)
        start = time.perf_counter()
        for layer in range(1, settings.max_layers + 1):
            below, below_emb = layers[-1], embeddings[-1]
            if len(below) == 0 or len(below) <= settings.stop_at:
                break
            t = time.perf_counter()
            if layer == 1 and first_layer is not None:
                # One cluster per sub-question: never re-split, whatever its length.
                clusters = first_layer(below_emb)
            else:
                clusters = raptor_clusters(below_emb, settings.clustering, self.seed)
                counts = np.array(self.measure.count_many([n.text for n in below]), dtype=np.int64)
                clusters = cap_cluster_tokens(
                    clusters, below_emb, counts, settings.max_cluster_tokens, settings.clustering, self.seed
                )
            timings["cluster_seconds"] += time.perf_counter() - t

            t = time.perf_counter()
            nodes, dropped = self.summarize(layer, below, clusters)
            empty += dropped
            timings["summarize_seconds"] += time.perf_counter() - t
            if not nodes:
                break
            t = time.perf_counter()
            embeddings.append(self.encoder.encode_documents([n.text for n in nodes]).astype(np.float32))
            timings["embed_seconds"] += time.perf_counter() - t
            layers.append(nodes)
            if len(clusters) == 1:  # everything below went into one summary: the root
                break
        spent = lm_work_since(self.lm, work)
        tree = SummaryTree(
            layers, time.perf_counter() - start, timings, empty, spent["lm_calls"], spent["lm_prompt_tokens"]
        )
        log.debug("tree built: nodes per layer %s in %.1f s", tree.nodes_per_layer(), tree.build_seconds)
        return tree, embeddings

    def summarize(self, layer: int, below: list[TreeNode], clusters: list[np.ndarray]) -> tuple[list[TreeNode], int]:
        """One summary node per cluster (children in reading order); empty summaries are dropped."""
        prompts = []
        for members in clusters:
            context = "\n\n".join(" ".join(below[i].text.splitlines()) for i in sorted(members))
            if self.settings.summary_input_tokens is not None:
                context = self.measure.truncate(context, self.settings.summary_input_tokens)
            prompts.append(self.settings.summary_prompt.format(context=context))
        summaries = self.lm.chat(prompts, self.settings.summary_max_tokens) if prompts else []
        nodes: list[TreeNode] = []
        dropped = 0
        for members, summary in zip(clusters, summaries, strict=False):
            summary = " ".join(summary.split())
            if not summary:
                dropped += 1
                continue
            children = tuple(int(i) for i in sorted(members))
            sources = tuple(dict.fromkeys(s for i in children for s in below[i].source_ids))
            nodes.append(TreeNode(layer, len(nodes), summary, children, sources))
        if dropped:
            log.warning(
                "layer %d: %d of %d cluster summaries came back empty and were dropped", layer, dropped, len(clusters)
            )
        return nodes, dropped
