"""Plain-loop reference implementations of the selectors and the submodular packer, for clarity, not speed.

Each mirrors its vectorised counterpart's definition and tie rule (lowest index wins) with Python
loops over candidates and explicit dot products or determinants. Tests compare the two on random
pools; the benchmarks (benchmarks/bench_diversifiers.py, benchmarks/bench_submodular.py) time them side
by side.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from harness.pack.base import PackingRequest
from harness.pack.budget import fits
from harness.pack.features import snippet_features
from harness.pack.submod import GAIN_TOLERANCE, TERMS, SubmodularPacker, snippet_similarity


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


# ---- the submodular packer ------------------------------------------------------------------------
@dataclass
class ReferenceInputs:
    relevance: list[float]  # Rel weights r_i
    query_terms: list[set[int]]  # query-term columns each snippet contains
    similarity: list[list[float]]  # cosine (clipped at 0 inside)
    documents: list[int]
    diversity_relevance: list[float]
    weights: dict[str, float]
    alpha: float


def reference_raw_terms(inputs: ReferenceInputs, chosen: list[int]) -> dict[str, float]:
    n = len(inputs.relevance)
    rel = 0.0
    for i in chosen:
        rel += inputs.relevance[i]
    covered: set[int] = set()
    for i in chosen:
        covered |= inputs.query_terms[i]
    representativeness = 0.0
    for i in range(n):
        degree = 0.0
        for j in range(n):
            degree += max(inputs.similarity[i][j], 0.0)
        coverage = 0.0
        for j in chosen:
            coverage += max(inputs.similarity[i][j], 0.0)
        representativeness += min(coverage, inputs.alpha * degree)
    mass: dict[int, float] = {}
    for i in chosen:
        mass[inputs.documents[i]] = mass.get(inputs.documents[i], 0.0) + inputs.diversity_relevance[i]
    diversity = 0.0
    for value in mass.values():
        diversity += math.sqrt(value)
    return {"rel": rel, "qry": float(len(covered)), "cov": representativeness, "div": diversity}


def reference_objective(inputs: ReferenceInputs, chosen: list[int]) -> float:
    """F(S) evaluated from scratch, each term divided by its value on the ground set."""
    full = reference_raw_terms(inputs, list(range(len(inputs.relevance))))
    raw = reference_raw_terms(inputs, list(chosen))
    total = 0.0
    for term in TERMS:
        if full[term] > 0:
            total += inputs.weights[term] * raw[term] / full[term]
    return total


def reference_greedy(
    inputs: ReferenceInputs, costs: list[int], budget: int, max_snippets: int | None = None
) -> tuple[list[int], bool]:
    """Cost-scaled greedy with incremental state, one candidate at a time, then the singleton check."""
    n = len(costs)
    full = reference_raw_terms(inputs, list(range(n)))
    scale = {t: (inputs.weights[t] / full[t] if full[t] > 0 else 0.0) for t in TERMS}
    sim = [[max(v, 0.0) for v in row] for row in inputs.similarity]
    cap = [inputs.alpha * sum(row) for row in sim]
    coverage = [0.0] * n
    covered: set[int] = set()
    mass: dict[int, float] = {}
    chosen: list[int] = []
    value = 0.0
    limit = n if max_snippets is None else min(n, max_snippets)

    def gain_of(x: int) -> float:
        rel = inputs.relevance[x]
        qry = float(len(inputs.query_terms[x] - covered))
        cov = 0.0
        for i in range(n):
            cov += min(coverage[i] + sim[i][x], cap[i]) - min(coverage[i], cap[i])
        before = mass.get(inputs.documents[x], 0.0)
        div = math.sqrt(before + inputs.diversity_relevance[x]) - math.sqrt(before)
        return scale["rel"] * rel + scale["qry"] * qry + scale["cov"] * max(cov, 0.0) + scale["div"] * div

    while len(chosen) < limit:
        best, best_ratio, best_gain = None, -math.inf, 0.0
        for x in range(n):
            if x in chosen or not fits([costs[i] for i in chosen] + [costs[x]], budget):
                continue
            gain = gain_of(x)
            if gain <= GAIN_TOLERANCE:
                continue
            ratio = gain / max(costs[x], 1)
            if ratio > best_ratio:
                best, best_ratio, best_gain = x, ratio, gain
        if best is None:
            break
        chosen.append(best)
        value += best_gain
        covered |= inputs.query_terms[best]
        for i in range(n):
            coverage[i] += sim[i][best]
        mass[inputs.documents[best]] = mass.get(inputs.documents[best], 0.0) + inputs.diversity_relevance[best]

    singleton, singleton_value = None, -math.inf
    for s in range(n):
        if fits([costs[s]], budget):
            alone = reference_objective(inputs, [s])
            if alone > singleton_value:
                singleton, singleton_value = s, alone
    if singleton is not None and singleton_value > value + GAIN_TOLERANCE:
        return [singleton], True
    return chosen, False


def reference_inputs(request: PackingRequest, packer: SubmodularPacker) -> ReferenceInputs:
    """The reference's inputs for a request, derived exactly as the packer derives its own."""
    features = snippet_features(request, packer.stem)
    if packer.diversity_relevance == "cosine":
        diversity = np.maximum(np.asarray(request.relevance, dtype=np.float64), 0.0).tolist()
    else:
        diversity = features.lexical.tolist()
    return ReferenceInputs(
        relevance=features.lexical.tolist(),
        query_terms=[set(np.flatnonzero(row).tolist()) for row in features.incidence],
        similarity=snippet_similarity(request.snippet_embeddings).tolist(),
        documents=features.doc_codes.tolist(),
        diversity_relevance=diversity,
        weights=dict(packer.weights),
        alpha=packer.alpha,
    )
