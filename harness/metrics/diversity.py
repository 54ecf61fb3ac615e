"""Diversity of a selection and redundancy of a pool, from candidate embeddings; plus the one
entry point that computes every selection column of a result row.

All similarities are cosines of the rows (re-normalised here, so callers need not guarantee unit
rows). Pairwise statistics run over unordered pairs i < j.
"""

from __future__ import annotations

import math

import numpy as np

from harness.core.types import Pool
from harness.metrics.ranking import (
    alpha_ndcg_at_k,
    err_ia_at_k,
    ndcg_at_k,
    nerr_ia_at_k,
    s_recall_at_k,
)
from harness.metrics.registry import (
    ALPHA_NDCG,
    APD,
    ERR_IA,
    NDCG,
    NERR_IA,
    POOL_REDUNDANCY,
    RECALL,
    S_RECALL,
    VENDI,
)
from harness.metrics.retrieval import recall_at_k

NEAR_DUPLICATE_THRESHOLD = 0.95


def unit_rows(embeddings: np.ndarray) -> np.ndarray:
    """float64 copy of ``embeddings`` with every row scaled to unit length."""
    rows = np.asarray(embeddings, dtype=np.float64)
    if rows.ndim != 2:
        raise ValueError(f"embeddings must be a 2-D (n, d) array, got shape {rows.shape}")
    norms = np.linalg.norm(rows, axis=1)
    if np.any(norms == 0.0) or not np.all(np.isfinite(norms)):
        bad = np.flatnonzero((norms == 0.0) | ~np.isfinite(norms)).tolist()
        raise ValueError(f"embedding rows {bad} have zero or non-finite norm; cosine is undefined")
    return rows / norms[:, None]


def cosine_gram(embeddings: np.ndarray) -> np.ndarray:
    rows = unit_rows(embeddings)
    return rows @ rows.T


def vendi_from_gram(gram: np.ndarray) -> np.ndarray | float:
    """Vendi score of one (n, n) similarity matrix, or of each in a (..., n, n) stack.

    exp of the Shannon entropy of the eigenvalues of K/n (Friedman & Dieng 2023). Eigenvalues are
    clipped at 0 (rounding makes tiny negative ones) and divided by their sum, which is n for a unit
    diagonal; that keeps the result inside [1, n] exactly: n identical items give 1, n orthogonal ones n.
    """
    gram = np.asarray(gram, dtype=np.float64)
    if gram.ndim < 2 or gram.shape[-1] != gram.shape[-2] or gram.shape[-1] == 0:
        raise ValueError(f"vendi_from_gram needs square (..., n, n) matrices with n >= 1, got shape {gram.shape}")
    eigenvalues = np.clip(np.linalg.eigvalsh(gram), 0.0, None)
    total = eigenvalues.sum(axis=-1, keepdims=True)
    if np.any(total <= 0.0):
        raise ValueError("vendi_from_gram: a similarity matrix has no positive eigenvalue")
    p = eigenvalues / total
    plogp = np.where(p > 0.0, p * np.log(np.where(p > 0.0, p, 1.0)), 0.0)
    score = np.exp(-plogp.sum(axis=-1))
    return float(score) if score.ndim == 0 else score


def vendi_score(embeddings: np.ndarray) -> float:
    """Vendi score (effective number of distinct items) of a set under cosine similarity; NaN for an empty set."""
    if len(embeddings) == 0:
        return math.nan
    return vendi_from_gram(cosine_gram(embeddings))


def _pair_cosines(embeddings: np.ndarray) -> np.ndarray:
    gram = cosine_gram(embeddings)
    upper = np.triu_indices(gram.shape[0], k=1)
    return gram[upper]


def average_pairwise_distance(embeddings: np.ndarray) -> float:
    """Mean cosine distance 1 - cos over unordered pairs; NaN with fewer than two items."""
    if len(embeddings) < 2:
        return math.nan
    return float(np.mean(1.0 - _pair_cosines(embeddings)))


def near_duplicate_fraction(embeddings: np.ndarray, threshold: float = NEAR_DUPLICATE_THRESHOLD) -> float:
    """Fraction of unordered pairs whose cosine exceeds ``threshold``; NaN with fewer than two items."""
    if not -1.0 <= threshold <= 1.0:
        raise ValueError(f"near_duplicate_fraction: threshold must be a cosine in [-1, 1], got {threshold}")
    if len(embeddings) < 2:
        return math.nan
    return float(np.mean(_pair_cosines(embeddings) > threshold))


def selection_metrics(selected_pool: Pool, full_pool: Pool, k: int) -> dict[str, float]:
    """Every selection column of a result row, at cutoff k.

    ``selected_pool`` holds the chosen candidates in selection order; ``full_pool`` the whole
    retrieved pool they were chosen from (it defines which gold documents were retrievable, the
    ideal ordering of alpha-NDCG and the pool's redundancy).
    """
    if selected_pool.example.question_id != full_pool.example.question_id:
        raise ValueError(
            f"selection_metrics: selected pool is for {selected_pool.example.question_id!r} "
            f"but the full pool is for {full_pool.example.question_id!r}"
        )
    gold = full_pool.example.gold_doc_ids
    ranked = [cand.source_ids for cand in selected_pool.candidates]
    pool_ranked = [cand.source_ids for cand in full_pool.candidates]
    retrievable = {source for sources in pool_ranked for source in sources}
    top = selected_pool.embeddings[:k]
    return {
        RECALL: recall_at_k(ranked, gold, k),
        NDCG: ndcg_at_k(ranked, gold, k),
        ALPHA_NDCG: alpha_ndcg_at_k(ranked, gold, k, ideal_candidates=pool_ranked),
        S_RECALL: s_recall_at_k(ranked, gold, k, retrievable_ids=retrievable),
        ERR_IA: err_ia_at_k(ranked, gold, k),
        NERR_IA: nerr_ia_at_k(ranked, gold, k, judged=pool_ranked),
        APD: average_pairwise_distance(top),
        VENDI: vendi_score(top),
        POOL_REDUNDANCY: near_duplicate_fraction(full_pool.embeddings),
        # distinct gold documents the selection could have reached; 0 is where s_recall is 0 by convention
        "gold_in_pool": len(set(gold) & retrievable),
    }
