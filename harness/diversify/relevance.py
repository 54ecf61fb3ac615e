"""Query relevance and rank-order helpers shared by the selectors.

Relevance is ``s_i = <q, e_i>``, computed with the same expression the kNN selector ranks by, so
a selector that degenerates to "most relevant first" reproduces kNN bit for bit (ties included).
"""

from __future__ import annotations

import numbers

import numpy as np

from harness.core.types import Pool
from harness.diversify.ties import descending_order


def query_similarity(pool: Pool) -> np.ndarray:
    """Cosine of every candidate to the question, as float64 (the float32 product, cast exactly)."""
    similarity = np.asarray(pool.embeddings @ pool.query_embedding, dtype=np.float64)
    if not np.all(np.isfinite(similarity)):
        bad = int(np.flatnonzero(~np.isfinite(similarity))[0])
        raise ValueError(
            f"pool {pool.example.question_id!r}: candidate {bad} ({pool.candidates[bad].cand_id!r}) "
            f"has a non-finite query similarity {similarity[bad]}"
        )
    return similarity


def check_selection_inputs(embeddings: np.ndarray, relevance: np.ndarray, k: int) -> int:
    """Validate a kernel's inputs; return the number of items to select, min(k, m)."""
    if embeddings.ndim != 2:
        raise ValueError(f"embeddings must be a 2-D (m, d) array, got shape {embeddings.shape}")
    if relevance.shape != (embeddings.shape[0],):
        raise ValueError(
            f"relevance must have shape ({embeddings.shape[0]},) to match the embeddings, got {relevance.shape}"
        )
    if isinstance(k, bool) or not isinstance(k, numbers.Integral) or k < 1:
        raise ValueError(f"k must be a positive integer, got {k!r}")
    if not np.all(np.isfinite(relevance)):
        bad = np.flatnonzero(~np.isfinite(relevance)).tolist()
        raise ValueError(f"relevance has non-finite values at positions {bad}")
    return min(int(k), embeddings.shape[0])


def knn_order(relevance: np.ndarray, k: int) -> np.ndarray:
    """The k most relevant indices, most relevant first, lower index first among ties."""
    return descending_order(relevance)[:k]


def fill_in_rank_order(chosen: list[int], relevance: np.ndarray, k: int) -> np.ndarray:
    """``chosen`` followed by the most relevant unchosen items until there are min(k, m) of them."""
    k_eff = min(int(k), relevance.shape[0])
    if len(chosen) >= k_eff:
        return np.asarray(chosen[:k_eff], dtype=np.intp)
    taken = np.zeros(relevance.shape[0], dtype=bool)
    taken[chosen] = True
    rest = [int(i) for i in descending_order(relevance) if not taken[i]]
    return np.asarray(chosen + rest[: k_eff - len(chosen)], dtype=np.intp)


def sigmoid(logits: np.ndarray) -> np.ndarray:
    """Logistic map to (0, 1), written to stay finite for large |logit|."""
    logits = np.asarray(logits, dtype=np.float64)
    return np.exp(-np.logaddexp(0.0, -logits))
