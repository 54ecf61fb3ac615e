"""Plain-loop reference implementations of the selectors, written for clarity, not speed.

Each mirrors its vectorised counterpart's definition and tie rule (lowest index wins) with Python
loops over candidates and explicit dot products or determinants. Tests compare the two on random
pools; the benchmark times them side by side.
"""

from __future__ import annotations

import math

import numpy as np


def _dot(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.dot(np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)))


def _best(values: dict[int, float], largest: bool = True) -> int:
    """Key with the largest (smallest) value; the lowest key among ties."""
    best_key = None
    for key in sorted(values):
        if best_key is None or (values[key] > values[best_key] if largest else values[key] < values[best_key]):
            best_key = key
    return best_key


def knn_loop(relevance, k: int) -> list[int]:
    remaining = {i: float(r) for i, r in enumerate(relevance)}
    chosen = []
    for _ in range(min(k, len(remaining))):
        pick = _best(remaining)
        chosen.append(pick)
        del remaining[pick]
    return chosen


def mmr_loop(embeddings, relevance, k: int, lambda_: float) -> list[int]:
    m = len(relevance)
    chosen = [_best({i: float(relevance[i]) for i in range(m)})]
    while len(chosen) < min(k, m):
        objective = {}
        for i in range(m):
            if i in chosen:
                continue
            redundancy = max(_dot(embeddings[i], embeddings[j]) for j in chosen)
            objective[i] = lambda_ * float(relevance[i]) - (1.0 - lambda_) * redundancy
        chosen.append(_best(objective))
    return chosen


def maxmin_loop(embeddings, relevance, k: int) -> list[int]:
    m = len(relevance)
    chosen = [_best({i: float(relevance[i]) for i in range(m)})]
    while len(chosen) < min(k, m):
        objective = {}
        for i in range(m):
            if i not in chosen:
                objective[i] = min(1.0 - _dot(embeddings[i], embeddings[j]) for j in chosen)
        chosen.append(_best(objective))
    return chosen


def dpp_brute_force(embeddings, relevance, k: int, relevance_floor: float = 1e-3, min_gain: float = 1e-10) -> list[int]:
    """Greedy MAP by determinants: each step maximises log det L_{S+i}; stops when the best
    det(L_{S+i}) / det(L_S) <= min_gain, then completes in kNN order."""
    m = len(relevance)
    quality = [max(float(r), 0.0) + relevance_floor for r in relevance]
    kernel = np.array(
        [[quality[i] * _dot(embeddings[i], embeddings[j]) * quality[j] for j in range(m)] for i in range(m)]
    )
    chosen: list[int] = []
    log_det = 0.0
    while len(chosen) < min(k, m):
        candidates = {}
        for i in range(m):
            if i in chosen:
                continue
            subset = chosen + [i]
            sign, value = np.linalg.slogdet(kernel[np.ix_(subset, subset)])
            candidates[i] = value if sign > 0 else -math.inf
        pick = _best(candidates)
        if math.exp(candidates[pick] - log_det) <= min_gain:  # det(L_{S+i}) / det(L_S)
            break
        chosen.append(pick)
        log_det = candidates[pick]
    for i in knn_loop(relevance, m):
        if len(chosen) >= min(k, m):
            break
        if i not in chosen:
            chosen.append(i)
    return chosen


def rng_scores_loop(embeddings, relevance, gamma: float) -> list[float]:
    m = len(relevance)
    scores = []
    for w in range(m):
        score = 1.0 - float(relevance[w])
        for v in range(m):
            if relevance[v] > relevance[w]:
                score += max(_dot(embeddings[v], embeddings[w]) - float(relevance[w]) + gamma, 0.0)
        scores.append(score)
    return scores


def rng_loop(embeddings, relevance, k: int, gamma: float) -> list[int]:
    scores = rng_scores_loop(embeddings, relevance, gamma)
    return knn_loop([-s for s in scores], k)


def near_duplicate_loop(embeddings, relevance, k: int, threshold: float) -> list[int]:
    order = knn_loop(relevance, len(relevance))
    kept: list[int] = []
    for i in order:
        if len(kept) == min(k, len(order)):
            break
        if all(_dot(embeddings[i], embeddings[j]) <= threshold for j in kept):
            kept.append(i)
    for i in order:
        if len(kept) >= min(k, len(order)):
            break
        if i not in kept:
            kept.append(i)
    return kept


def vendi_loop(embeddings) -> float:
    rows = [np.asarray(e, dtype=np.float64) / np.linalg.norm(e) for e in embeddings]
    n = len(rows)
    gram = np.array([[_dot(a, b) for b in rows] for a in rows])
    entropy = 0.0
    for eigenvalue in np.linalg.eigvalsh(gram / n):
        if eigenvalue > 0:
            entropy -= eigenvalue * math.log(eigenvalue)
    return math.exp(entropy)


def vendi_greedy_loop(embeddings, relevance, k: int, lambda_: float) -> list[int]:
    m = len(relevance)
    chosen = [_best({i: float(relevance[i]) for i in range(m)})]
    while len(chosen) < min(k, m):
        current = vendi_loop([embeddings[j] for j in chosen])
        objective = {}
        for i in range(m):
            if i not in chosen:
                gain = vendi_loop([embeddings[j] for j in chosen + [i]]) - current
                objective[i] = lambda_ * float(relevance[i]) + (1.0 - lambda_) * gain
        chosen.append(_best(objective))
    return chosen
