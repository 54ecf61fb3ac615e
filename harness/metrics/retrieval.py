"""Retrieval quality of a question's ranked pool: recall@k and all-gold@k over gold documents.

A candidate credits every document in its ``source_ids``; a gold document counts once however
many of its copies or chunks are retrieved, so near-duplicates cannot inflate recall.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable, Sequence

from harness.core.types import Pool


def _check_k(k: int) -> int:
    if isinstance(k, bool) or not isinstance(k, numbers.Integral) or k < 1:
        raise ValueError(f"k must be a positive integer, got {k!r}")
    return int(k)


def _retrieved_sources(ranked_source_ids: Sequence[str | tuple[str, ...]], k: int) -> set[str]:
    retrieved: set[str] = set()
    for entry in ranked_source_ids[:k]:
        if isinstance(entry, str):
            retrieved.add(entry)
        else:
            retrieved.update(entry)
    return retrieved


def recall_at_k(ranked_source_ids: Sequence[str | tuple[str, ...]], gold_ids: Iterable[str], k: int) -> float:
    """Fraction of distinct gold documents among the sources of the top-``k`` ranked entries.

    Each entry is one candidate's ``source_ids`` tuple (or a single document id); NaN with no gold docs.
    """
    k = _check_k(k)
    gold = set(gold_ids)
    if not gold:
        return math.nan
    return len(gold & _retrieved_sources(ranked_source_ids, k)) / len(gold)


def all_gold_at_k(ranked_source_ids: Sequence[str | tuple[str, ...]], gold_ids: Iterable[str], k: int) -> float:
    """1.0 if every gold document is among the sources of the top-``k`` entries, else 0.0; NaN with no gold docs."""
    recall = recall_at_k(ranked_source_ids, gold_ids, k)
    return recall if math.isnan(recall) else float(recall == 1.0)


def retrieval_metrics(pool: Pool, k: int) -> dict[str, float]:
    """recall@k and all-gold@k of a pool whose candidates are in rank order."""
    ranked = [cand.source_ids for cand in pool.candidates]
    gold = pool.example.gold_doc_ids
    return {"recall_at_k": recall_at_k(ranked, gold, k), "all_gold_at_k": all_gold_at_k(ranked, gold, k)}
