"""Checks of the retriever's BM25 and fusion settings, before anything loads.

``settings_problems`` covers a BM25 node (``retriever.bm25``: variant, k1, b, delta, tokenizer, stopwords,
stemmer) and ``fusion_problems`` a hybrid's fusion; each invalid value is one line naming its key. Once the
dataset has loaded (the config check loads it before any model), ``corpus_problems`` refuses a BM25 retriever
whose corpus is empty: no document of any question has a word the tokenizer keeps, so every score would be 0.
"""

from __future__ import annotations

from typing import Any

from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from harness.retrieve.bm25 import EMPTY_CORPUS, BM25Settings, settings_problems, tokenize
from harness.retrieve.corpus import document_text
from harness.retrieve.fusion import fusion_problems

FUSION_KEYS = ("fusion", "rrf_k", "dense_weight")


def _retriever(cfg: DictConfig) -> dict[str, Any] | None:
    try:
        node = OmegaConf.select(cfg, "retriever", default=None)
        resolved = OmegaConf.to_container(node, resolve=True) if isinstance(node, DictConfig) else None
    except OmegaConfBaseException:
        return None  # an interpolation that does not resolve is reported where the run resolves it
    return resolved if isinstance(resolved, dict) else None


def retriever_problems(cfg: DictConfig) -> list[str]:
    """One line per invalid BM25 or fusion setting of ``cfg.retriever``."""
    retriever = _retriever(cfg)
    if retriever is None:
        return []
    found = []
    if "bm25" in retriever:
        node = retriever["bm25"]
        if isinstance(node, dict):
            found += settings_problems(node)
        else:
            found.append(f"retriever.bm25={node!r} is not a mapping; allowed: the keys of conf/retriever/bm25.yaml")
    if any(key in retriever for key in FUSION_KEYS):
        found += fusion_problems(*(retriever.get(key) for key in FUSION_KEYS))
    return found


def corpus_problems(cfg: DictConfig, examples: list[Any]) -> list[str]:
    """The empty corpus of a BM25 retriever (valid settings assumed) as one line, else nothing."""
    retriever = _retriever(cfg)
    if retriever is None or not isinstance(retriever.get("bm25"), dict):
        return []
    settings = BM25Settings.of(retriever["bm25"])
    title = bool(retriever.get("embed_title", True))
    # Most corpora answer at their first document; only an empty one is read to the end.
    for ex in examples:
        texts = [document_text(doc, title) for doc in getattr(ex, "documents", ())]
        if texts and any(tokenize(settings, texts)):
            return []
    choice = OmegaConf.select(cfg, "dataset.name", default="?")
    return [f"retriever.bm25: {EMPTY_CORPUS} (dataset {choice!r}); allowed: a dataset whose documents have words"]


def empty_corpus_problems(cfg: DictConfig) -> list[str]:
    """``corpus_problems`` of the examples the config check loaded (the pipeline uses the same ones); a dataset
    the check does not load (a long-document one, chunked by its reader's tokenizer) is not looked at."""
    from harness.run.dataset_check import CHECKED_TARGETS, cache_folder, load_examples

    dataset = cfg.get("dataset")
    retriever = _retriever(cfg)
    if (
        retriever is None
        or "bm25" not in retriever
        or not isinstance(dataset, DictConfig)
        or not str(dataset.get("_target_", "")).startswith(CHECKED_TARGETS)
        or OmegaConf.select(dataset, "tokenizer", default=None) is not None
    ):
        return []
    return corpus_problems(cfg, load_examples(dataset, cache_folder(cfg))[0])
