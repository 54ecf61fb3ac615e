"""DTCRS (Dynamic Tree Construction for Recursive Summarization): a summary tree built per question, only for
questions that need one.

1. Classify the question (extractive / abstractive / yes-no / unanswerable) with the LM (``classifier=lm``):
   by likelihood (``classify_by=likelihood``: each class's name scored as the reply to the classification
   prompt, the most likely taken, so the LM decides every question; ``classifier_lm`` names a transformers LM
   when the tree's cannot score) or by its generated reply, falling back to rules on unparsed output
   (``classify_by=generation``); or by rules alone (``rules``); or by the question's
   annotated class (``annotation``, an oracle that separates classification from tree construction;
   ``gold`` is an older name of it). Only classes in ``tree_classes`` (default: abstractive) get a
   tree; any other question, an unannotated one under ``annotation`` included, keeps its pool
   unchanged (the dense baseline). Every row records the annotated class
   (``tree.annotated_class``, ``unannotated`` when the dataset gives none), so the classifier can be
   scored against it whichever classifier routed the question.
2. Generate a table of contents of the document with the LM (the document cut to
   ``toc_input_tokens``: a very long document gets a partial table of contents).
3. Decompose the question into sub-questions grounded in that table of contents.
4. Layer 1: one Gaussian-mixture component per sub-question, its mean initialised at the
   sub-question's embedding after the same reducer fitted on the chunks (``means_init``), with
   diagonal covariances by default (``first_layer_covariance``: full ones over ~n/K chunks are
   singular and EM folded all chunks into one component on QASPER papers); every cluster is
   summarised. Later layers: RAPTOR's BIC-sized clustering and the same stopping rules.

The tree depends on the question, so it is cached per (question, document, settings, LM, encoder,
seed). ``expand`` returns, with each question's pool, the facts that become ``tree.*`` row columns,
with the same keys whether or not a tree was built, so a reader of the results sees why it was or was
not: the class, its source (lm, rules, annotation) and whether the LM's output was parsed, the
annotated class and the annotators' agreement on it, the table of contents, the sub-questions, nodes per layer and
construction seconds (classification, table of contents and decomposition included; leaf embedding
excluded) and the LM calls and prompt tokens of the same steps. A tree read from the cache reports
its original build's seconds and LM work (``cached`` says so). ``last_fit`` keeps the last first-layer
fit (reducer, mixture, means_init) for inspection; the pipeline never reads it.
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

import numpy as np

from harness.cache import stable_hash
from harness.core.stage import StageInfo
from harness.core.types import Pool
from harness.lm.base import build_chat_lm
from harness.tree.base import TreeServices
from harness.tree.classify_prompts import classify_prompt as classify_prompt_named
from harness.tree.clustering import SeededFit, seeded_clusters
from harness.tree.questions import (
    CLASSIFIERS,
    CLASSIFY_BY,
    CLASSIFY_SCORES,
    DECOMPOSE_PROMPT,
    QUESTION_CLASSES,
    TOC_PROMPT,
    annotated_question_class,
    classifier_mode,
    classify_question,
    decompose_question,
    table_of_contents,
)
from harness.tree.recursive import RecursiveSummaryTree, identity_of
from harness.tree.summary_tree import SummaryTree, lm_work, lm_work_since

__all__ = ["CLASSIFIERS", "DynamicTree"]


class DynamicTree(RecursiveSummaryTree):
    def __init__(
        self,
        name: str = "dtcrs",
        lm=None,
        tree_classes: tuple[str, ...] | list[str] = ("abstractive",),
        classifier: str = "lm",
        max_subquestions: int = 4,
        toc_input_tokens: int = 3000,
        toc_max_tokens: int = 200,
        classify_max_tokens: int = 8,
        decompose_max_tokens: int = 150,
        first_layer_covariance: str = "diag",
        classify_by: str = "likelihood",
        classify_score: str = "sum",
        classifier_lm=None,
        classify_prompt: str = "zero_shot",
        **settings,
    ) -> None:
        super().__init__(name=name, lm=lm, **settings)
        tree_classes = tuple(tree_classes)
        unknown = [c for c in tree_classes if c not in QUESTION_CLASSES]
        if unknown:
            raise ValueError(f"tree {name!r}: unknown tree_classes {unknown}; choose from {QUESTION_CLASSES}")
        try:
            classifier = classifier_mode(classifier)
        except ValueError:
            raise ValueError(f"tree {name!r}: classifier must be one of {CLASSIFIERS}, got {classifier!r}") from None
        for field, value in (
            ("max_subquestions", max_subquestions),
            ("toc_input_tokens", toc_input_tokens),
            ("toc_max_tokens", toc_max_tokens),
            ("classify_max_tokens", classify_max_tokens),
            ("decompose_max_tokens", decompose_max_tokens),
        ):
            if value < 1:
                raise ValueError(f"tree {name!r}: {field} must be >= 1, got {value}")
        if classify_by not in CLASSIFY_BY:
            raise ValueError(f"tree {name!r}: classify_by must be one of {CLASSIFY_BY}, got {classify_by!r}")
        if classify_score not in CLASSIFY_SCORES:
            raise ValueError(f"tree {name!r}: classify_score must be one of {CLASSIFY_SCORES}, got {classify_score!r}")
        self.classify_by, self.classify_score = classify_by, classify_score
        try:
            self.classify_template = classify_prompt_named(classify_prompt)
        except ValueError as error:
            raise ValueError(f"tree {name!r}: {error}") from None
        self.classify_prompt = classify_prompt
        # The LM that classifies when it is not the tree's (a llama.cpp or API LM cannot score a reply).
        self._classifier_spec, self._classifier_lm = classifier_lm, None
        self.tree_classes = tree_classes
        # The seeded layer fits K components to all chunks at once: full covariances (55 parameters
        # each in 10 dimensions) over ~n/K chunks are singular, and on QASPER papers EM then folded
        # every chunk into one component. Diagonal covariances keep one cluster per sub-question.
        self.first_layer_clustering = replace(self.settings.clustering, covariance_type=first_layer_covariance)
        self.classifier = classifier
        self.max_subquestions = int(max_subquestions)
        self.toc_input_tokens = int(toc_input_tokens)
        self.toc_max_tokens = int(toc_max_tokens)
        self.classify_max_tokens = int(classify_max_tokens)
        self.decompose_max_tokens = int(decompose_max_tokens)
        self.last_fit: SeededFit | None = None

    def classifier_model(self, lm):
        """The LM that classifies: ``classifier_lm`` when given (built on first use), else the tree's own."""
        if self._classifier_spec is None:
            return lm
        if self._classifier_lm is None:
            self._classifier_lm = build_chat_lm(self._classifier_spec)
        return self._classifier_lm

    def question_key(self) -> dict[str, Any]:
        return {
            "tree_classes": list(self.tree_classes),
            "classifier": self.classifier,
            "max_subquestions": self.max_subquestions,
            "toc_input_tokens": self.toc_input_tokens,
            "toc_max_tokens": self.toc_max_tokens,
            "classify_max_tokens": self.classify_max_tokens,
            "decompose_max_tokens": self.decompose_max_tokens,
            "classify_by": [self.classify_by, self.classify_score],
            "classifier_lm": identity_of(self.classifier_model(None)) if self._classifier_spec is not None else None,
            "first_layer": self.first_layer_clustering.key(),
            "prompts": [self.classify_template, TOC_PROMPT, DECOMPOSE_PROMPT],
        }

    def expand(self, pool: Pool, services: TreeServices) -> tuple[Pool, StageInfo]:
        example = pool.example
        lm = self.language_model(services)
        measure = self.measure(services)

        work = lm_work(lm)
        start = time.perf_counter()
        annotation = annotated_question_class(example)
        classification = classify_question(
            example.question,
            self.classifier_model(lm),
            self.classifier,
            annotation.label,
            self.classify_max_tokens,
            self.classify_by,
            self.classify_score,
            self.classify_prompt,
        )
        classify_seconds = time.perf_counter() - start
        info: StageInfo = {
            "classifier": self.classifier,
            "question_class": classification.label,
            "class_source": classification.source,
            "class_decided_by": classification.decided_by,
            "class_raw": classification.raw,
            "lm_parsed": classification.lm_parsed,
            "annotated_class": annotation.label,
            "annotator_agreement": annotation.agreement,
            "annotators": annotation.annotators,
        }
        if classification.label not in self.tree_classes or not example.documents:
            return pool, {
                **info,
                "built": False,
                "toc": "",
                "sub_questions": [],
                "sub_question_source": "",
                "first_layer_components": 0,
                "nodes_per_layer": [len(example.documents)],
                "summary_nodes": 0,
                "build_seconds": classify_seconds,
                "timings": {"classify_seconds": classify_seconds},
                "empty_summaries": 0,
                **lm_work_since(lm, work),
                "cached": False,
                "cache_key": "",
            }

        leaves, leaf_embeddings = self.leaves(pool, services)
        key = stable_hash(*self.base_key(leaves, services), example.question, self.question_key(), classification.label)
        record = self.cached(key)
        if record is not None:
            tree = SummaryTree.from_json(record["tree"])
            embeddings = [leaf_embeddings] + self.summary_embeddings(key, tree, services)
            return self.tree_pool(pool, tree, embeddings), {**record["info"], **info, "cached": True, "cache_key": key}

        t = time.perf_counter()
        document = measure.truncate("\n".join(n.text for n in leaves), self.toc_input_tokens)
        toc = table_of_contents(document, lm, self.toc_max_tokens)
        toc_seconds = time.perf_counter() - t

        t = time.perf_counter()
        subquestions, sub_source, _ = decompose_question(
            example.question, toc, lm, self.max_subquestions, self.decompose_max_tokens
        )
        decompose_seconds = time.perf_counter() - t

        t = time.perf_counter()
        seeds = np.asarray(services.encoder.encode_queries(subquestions), dtype=np.float32)
        seed_seconds = time.perf_counter() - t
        fits: list[SeededFit | None] = []

        def first_layer(embeddings: np.ndarray) -> list[np.ndarray]:
            clusters, fit = seeded_clusters(embeddings, seeds, self.first_layer_clustering, services.seed)
            fits.append(fit)
            return clusters

        tree, embeddings = self.builder(services).build(leaves, leaf_embeddings, first_layer=first_layer)
        self.last_fit = fits[0] if fits else None
        timings = {
            "classify_seconds": classify_seconds,
            "toc_seconds": toc_seconds,
            "decompose_seconds": decompose_seconds,
            "embed_subquestions_seconds": seed_seconds,
            **tree.timings,
        }
        built = {
            "built": True,
            "toc": toc,
            "sub_questions": subquestions,
            "sub_question_source": sub_source,
            "first_layer_components": len(self.last_fit.components) if self.last_fit is not None else 0,
            "nodes_per_layer": tree.nodes_per_layer(),
            "summary_nodes": len(tree.summary_nodes()),
            "build_seconds": classify_seconds + toc_seconds + decompose_seconds + seed_seconds + tree.build_seconds,
            "timings": timings,
            "empty_summaries": tree.empty_summaries,
            **lm_work_since(lm, work),  # classification, table of contents, decomposition and summaries
        }
        self.store(key, {"tree": tree.to_json(), "info": built}, embeddings)
        return self.tree_pool(pool, tree, embeddings), {**info, **built, "cached": False, "cache_key": key}
