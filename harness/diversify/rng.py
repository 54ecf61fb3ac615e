"""RNG-Score: relative-neighbourhood-graph scoring of candidates, chosen k lowest first.

    score_g(w) = 1 - r(w) + sum over v in the pool with r(v) > r(w) of [<v, w> - r(w) + g]_+

r is the query relevance of a candidate and <v, w> the cosine between candidates. The hinge charges
w for every more relevant candidate v that lies closer to w than the query does (v "occludes" w, as
an edge of the relative neighbourhood graph would); g shifts how close counts as occluding. The
comparison r(v) > r(w) is strict, so equally relevant candidates never charge one another.

There is no greedy loop: scores come from the Gram matrix in one pass. Selection needs only a
corner of it: score(w) >= 1 - r(w), and w's hinges involve only candidates more relevant than w, so
``rng_select`` scores the most relevant candidates first and stops as soon as no candidate left
out can beat the k-th best score found (usually after a few dozen of m = 100; see ``rng_select``).
``rng_select_full`` and ``rng_scores`` keep the whole-matrix computation, which the shortcut
reproduces bit for bit.

Limits: for g <= -2 every hinge is 0 (cosines lie in [-1, 1] and r in [-1, 1]), so the score is
1 - r and the selection is kNN; for very large g the number of more relevant candidates dominates
the score, which again orders candidates by relevance, i.e. kNN.

``relevance="cosine"`` uses r = <q, w> from the embeddings (the kNN ranking). ``relevance=
"cross_encoder"`` is the dissimilarity variant: r comes from a cross-encoder reranker, read from the
candidates' ``score`` field or passed explicitly as an array. Cross-encoder outputs are usually
logits, so with ``logits=True`` (the default) they go through a sigmoid into (0, 1), where they
are comparable with the cosines inside the hinge; with ``logits=False`` they must already lie in [0, 1].
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from harness.core.types import Pool
from harness.diversify.base import Diversifier
from harness.diversify.relevance import (
    check_selection_inputs,
    query_similarity,
    sigmoid,
)
from harness.diversify.ties import ascending_order, descending_order

RELEVANCE_SOURCES = ("cosine", "cross_encoder")


# The first prefix of the relevance ranking that rng_select scores: FIRST_PREFIX candidates (at
# least 2k), tried only if that is at most half the pool. On clustered pools of 100
# (benchmarks/bench_diversifiers.py) the k = 5 selection is settled within the 16-28 most relevant
# candidates, so one prefix of 24 usually suffices. If it does not, its k-th best score tells
# exactly how long a prefix is sure to suffice; that one is scored if it is at most
# SECOND_PREFIX_SHARE of the pool, else the whole pool is (its Gram matrix then costs about as much).
FIRST_PREFIX = 24
SECOND_PREFIX_SHARE = 0.75


@lru_cache(maxsize=32)
def _constants(m: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Read-only float32 (zeros (m, m), ones (m,), strict lower triangle (m, m)) for pools of size m.

    Same-shape operands keep NumPy on its fast contiguous loops; the triangle [w, v] = 1 where v < w
    is "v is more relevant than w" for a pool in strictly decreasing relevance order.
    """
    arrays = (
        np.zeros((m, m), dtype=np.float32),
        np.ones(m, dtype=np.float32),
        np.tril(np.ones((m, m), dtype=np.float32), k=-1),
    )
    for array in arrays:
        array.setflags(write=False)
    return arrays


def _masked_hinges_overwrite(gram: np.ndarray, relevance: np.ndarray, gamma: float) -> np.ndarray:
    """The (n, n) float32 hinges [<v,w> - r(w) + g]_+ where r(v) > r(w), else 0, written over ``gram``.

    Rows are indexed by the scored candidate w and columns by the occluder v, so the per-w
    threshold is a column vector.
    """
    n = relevance.shape[0]
    zeros, _, strictly_below = _constants(n)
    # A hinge <v,w> - r(w) + g is positive only when <v,w> exceeds t(w) = r(w) - g. Cosines never
    # exceed 1, so a row with t(w) >= 1 contributes nothing; +inf enforces that exactly even when
    # a rounded cosine lies a hair above 1 (this is what makes g <= -2 reproduce kNN).
    threshold = relevance - gamma
    threshold[threshold >= 1.0] = np.inf
    hinge = gram
    hinge -= threshold.astype(np.float32)[:, None]
    np.maximum(hinge, zeros, out=hinge)
    if np.all(relevance[:-1] > relevance[1:]):  # rows in rank order: a fixed triangle
        hinge *= strictly_below
    else:
        hinge *= relevance[None, :] > relevance[:, None]  # [w, v]: r(v) > r(w)
    return hinge


def _rng_scores_overwrite(gram: np.ndarray, relevance: np.ndarray, gamma: float) -> np.ndarray:
    """RNG-Scores, using ``gram`` (float32, symmetric, our own temporary) as scratch space.

    The sum over v is one float32 mat-vec over the whole (m, m) hinge matrix.
    """
    hinge = _masked_hinges_overwrite(gram, relevance, gamma)
    return 1.0 - relevance + hinge @ _constants(relevance.shape[0])[1]


def _prefix_scores(
    embeddings: np.ndarray, relevance: np.ndarray, ranked: np.ndarray | None, size: int, gamma: float
) -> np.ndarray:
    """Exact RNG-Scores of the ``size`` most relevant candidates, +inf for every other one.

    ``ranked`` lists the pool by decreasing relevance (None: the pool already is in that order).
    The candidates more relevant than one of the top ``size`` are all among the top ``size``, so
    their scores need only the Gram matrix of those rows. Their hinges are placed at their own
    rows and columns of an otherwise zero (m, m) matrix, which is what the full computation's
    masked matrix holds in those rows, and summed by the same (m, m) mat-vec, so every score
    computed here equals the full computation's bit for bit. (A shorter matrix would not do: BLAS
    sums a row differently depending on where it falls in the matrix's blocks of rows.)
    """
    m = relevance.shape[0]
    top = slice(0, size) if ranked is None else ranked[:size]
    rows = embeddings[top]
    # NumPy computes rows @ rows.T as one symmetric rank-k update (BLAS syrk), and OpenBLAS's syrk
    # gives every entry independently of the matrix's size and of where the two rows sit in it
    # (for two rows or more; a prefix has at least 2k), so these entries are the full
    # Gram matrix's. tests/test_diversify_rng.py checks the resulting scores bit for bit.
    gram = np.asarray(rows @ rows.T, dtype=np.float32)
    hinge = np.zeros((m, m), dtype=np.float32)
    top_hinges = _masked_hinges_overwrite(gram, relevance[top], gamma)
    if ranked is None:
        hinge[:size, :size] = top_hinges
    else:
        hinge[np.ix_(top, top)] = top_hinges
    scores = 1.0 - relevance + hinge @ _constants(m)[1]
    if ranked is None:
        scores[size:] = np.inf
    else:
        scores[ranked[size:]] = np.inf
    return scores


def rng_scores(gram: np.ndarray, relevance: np.ndarray, gamma: float = 0.0) -> np.ndarray:
    """RNG-Score of every candidate (lower is better) from the candidates' cosine Gram matrix.

    Hinges are summed in float32 (the Gram's own precision); scores are float64.
    """
    relevance = np.asarray(relevance, dtype=np.float64)
    m = relevance.shape[0]
    if gram.shape != (m, m):
        raise ValueError(f"gram must have shape ({m}, {m}) to match relevance, got {gram.shape}")
    return _rng_scores_overwrite(np.array(gram, dtype=np.float32), relevance, float(gamma))


def rng_select_full(embeddings: np.ndarray, relevance: np.ndarray, k: int, gamma: float = 0.0) -> np.ndarray:
    """``rng_select`` by scoring every candidate from the whole (m, m) Gram matrix (the reference path)."""
    k_eff = check_selection_inputs(embeddings, relevance, k)
    gram = np.asarray(embeddings @ embeddings.T, dtype=np.float32)
    scores = _rng_scores_overwrite(gram, np.asarray(relevance, dtype=np.float64), float(gamma))
    return ascending_order(scores)[:k_eff]


def rng_select(embeddings: np.ndarray, relevance: np.ndarray, k: int, gamma: float = 0.0) -> np.ndarray:
    """Indices of the min(k, m) lowest RNG-Scores, lowest first, lower index first among ties.

    Exact shortcut: score(w) >= 1 - r(w), and w's hinges involve only candidates more relevant than
    w. So the most relevant candidates are scored first (a prefix of the relevance ranking); once
    the k best of them beat the floor 1 - r of the most relevant candidate left out (on a tie, only
    if every left-out candidate has a higher pool index, since the lower index wins), no left-out
    candidate can enter the selection and the rest of the Gram matrix is never computed. Otherwise
    one longer prefix, sized so that it must settle the selection, or else the whole pool is
    scored. The selection is ``rng_select_full``'s, ties included.
    """
    k_eff = check_selection_inputs(embeddings, relevance, k)
    relevance = np.asarray(relevance, dtype=np.float64)
    gamma = float(gamma)
    m = relevance.shape[0]
    # Stable order: equally relevant candidates keep pool order (neither charges the other anyway).
    ranked = None if np.all(relevance[:-1] >= relevance[1:]) else descending_order(relevance)
    # Floor of each score in rank order, non-decreasing: 1 - r is monotone in r, and a hinge sum
    # (never negative) only adds to it, in floating point too, since rounding is monotone.
    floors = 1.0 - (relevance if ranked is None else relevance[ranked])
    size, limit = max(FIRST_PREFIX, 2 * k_eff), m // 2
    while size <= limit:
        scores = _prefix_scores(embeddings, relevance, ranked, size, gamma)
        selection = ascending_order(scores)[:k_eff]
        last = int(selection[-1])
        lowest_left_out = size if ranked is None else int(ranked[size:].min())
        if floors[size] > scores[last] or (floors[size] == scores[last] and lowest_left_out > last):
            return selection
        # Scoring more candidates can only lower the k-th best score, so the prefix that ends
        # just before the first floor above the current k-th score settles the selection.
        size, limit = int(np.searchsorted(floors, scores[last], side="right")), int(SECOND_PREFIX_SHARE * m)
    return rng_select_full(embeddings, relevance, k_eff, gamma)


class RNGDiversifier(Diversifier):
    shown_settings = ("gamma", "relevance", "logits")

    def __init__(self, name: str, k: int, gamma: float = 0.0, relevance: str = "cosine", logits: bool = True) -> None:
        super().__init__(name, k)
        if relevance not in RELEVANCE_SOURCES:
            raise ValueError(f"diversifier {name!r}: relevance must be one of {RELEVANCE_SOURCES}, got {relevance!r}")
        if not np.isfinite(gamma):
            raise ValueError(f"diversifier {name!r}: gamma must be finite, got {gamma}")
        self.gamma = float(gamma)
        self.relevance = relevance
        self.logits = bool(logits)

    def query_relevance(self, pool: Pool, relevances: np.ndarray | None = None) -> np.ndarray:
        """r for every candidate: the query cosine, or the mapped cross-encoder relevance."""
        if self.relevance == "cosine":
            if relevances is not None:
                raise ValueError(
                    f"diversifier {self.name!r} uses relevance='cosine'; "
                    "explicit relevances need relevance='cross_encoder'"
                )
            return query_similarity(pool)
        raw = np.asarray(
            [cand.score for cand in pool.candidates] if relevances is None else relevances, dtype=np.float64
        )
        if raw.shape != (len(pool.candidates),):
            raise ValueError(
                f"diversifier {self.name!r}: {raw.shape} relevances for a pool of {len(pool.candidates)} candidates"
            )
        if not np.all(np.isfinite(raw)):
            raise ValueError(f"diversifier {self.name!r}: non-finite cross-encoder relevance in {raw.tolist()}")
        if self.logits:
            return sigmoid(raw)
        if raw.min() < 0.0 or raw.max() > 1.0:
            raise ValueError(
                f"diversifier {self.name!r}: relevances must lie in [0, 1] when logits=False, "
                f"got range [{raw.min()}, {raw.max()}]"
            )
        return raw

    def select_indices(self, pool: Pool, relevances: np.ndarray | None = None) -> np.ndarray:
        if not pool.candidates:
            return np.empty(0, dtype=np.intp)
        return rng_select(pool.embeddings, self.query_relevance(pool, relevances), self.k, self.gamma)
