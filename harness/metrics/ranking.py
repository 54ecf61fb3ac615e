"""Rank-based quality of a selection, with gold documents as the relevant items and the subtopics.

Each ranked entry is one candidate's ``source_ids`` (or a single document id): a summary node
covers several documents, a near-duplicate copy covers its source again. Metrics look at the
first ``k`` entries and return NaN when the question has no gold documents.

* recall@k: distinct gold documents covered / gold documents (one definition, in ``retrieval``).
* NDCG@k: binary gains; a position gains 1 only if it covers a gold document no earlier position
  covered, so repeated copies of a source earn nothing. Ideal: min(|gold|, k) gains of 1 at the top.
* alpha-NDCG@k (Clarke et al., SIGIR 2008): subtopics = gold documents; a position gains
  sum_t J(d, t) (1 - alpha)^(times t was covered above it). The ideal ordering is built greedily
  (the best next gain at each step) from a candidate collection, by default one document per gold
  id; ``selection_metrics`` passes the full retrieved pool, so the ideal is the best ordering that
  pool allows. NaN also when that ideal gains nothing (no gold document is retrievable).
* S-recall@k (Zhai et al. 2003): subtopics covered / subtopics, counting only the retrievable
  gold documents (those present in the full pool). When the question has gold documents but none is
  retrievable (perturbation pushed them all out of a frozen pool) it scores 0, the convention of the
  diversity papers: a NaN would silently drop those hardest questions from the mean and change n between
  methods and levels. ``selection_metrics`` also writes ``gold_in_pool`` so the subset can be re-scored.
* ERR-IA@k, unnormalised (Chapelle et al. 2009, intent-aware form of Agrawal et al.): intents = gold
  documents, uniformly weighted; for binary grades the stop probability of a covering position is
  (2^1 - 1) / 2^1 = 1/2. This is the expected reciprocal rank itself, on no normalised scale: neither of
  the two figures TREC's ndeval prints (``err_ia_at_k`` says how each relates to it).
* nERR-IA@k (ndeval's collection-dependent normalisation): ERR-IA@k of the ranking divided by ERR-IA@k
  of ndeval's greedy ideal ranking of the judged documents; ``nerr_ia_at_k``.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable, Sequence

import numpy as np

from harness.metrics.retrieval import recall_at_k

__all__ = ["alpha_ndcg_at_k", "err_ia_at_k", "nerr_ia_at_k", "ndcg_at_k", "recall_at_k", "s_recall_at_k"]

SourceEntry = str | Sequence[str]
ERR_STOP_PROBABILITY = 0.5  # (2^g - 1) / 2^g_max with binary grades g, g_max = 1


def _check_k(k: int) -> int:
    if isinstance(k, bool) or not isinstance(k, numbers.Integral) or k < 1:
        raise ValueError(f"k must be a positive integer, got {k!r}")
    return int(k)


def _source_sets(ranked: Sequence[SourceEntry]) -> list[frozenset[str]]:
    return [frozenset((entry,)) if isinstance(entry, str) else frozenset(entry) for entry in ranked]


def _unique(ids: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(ids))


def _coverage(entries: Sequence[frozenset[str]], subtopics: Sequence[str]) -> np.ndarray:
    """J[r, t] = 1.0 when entry r covers subtopic t."""
    return np.array([[topic in entry for topic in subtopics] for entry in entries], dtype=np.float64).reshape(
        len(entries), len(subtopics)
    )


def _discounts(n: int) -> np.ndarray:
    return 1.0 / np.log2(np.arange(2, n + 2))


def ndcg_at_k(ranked: Sequence[SourceEntry], gold_ids: Iterable[str], k: int) -> float:
    """NDCG@k with binary gains, crediting each gold document at its first appearance only."""
    k = _check_k(k)
    gold = set(gold_ids)
    if not gold:
        return math.nan
    credited: set[str] = set()
    gains = np.zeros(min(k, len(ranked)))
    for rank, entry in enumerate(_source_sets(ranked[:k])):
        new = (entry & gold) - credited
        gains[rank] = 1.0 if new else 0.0
        credited |= new
    ideal = _discounts(min(len(gold), k)).sum()
    return float(gains @ _discounts(gains.size) / ideal)


def _alpha_gains(coverage: np.ndarray, alpha: float) -> np.ndarray:
    covered_before = np.cumsum(coverage, axis=0) - coverage
    return (coverage * (1.0 - alpha) ** covered_before).sum(axis=1)


def _ideal_alpha_gains(coverage: np.ndarray, alpha: float, k: int) -> np.ndarray:
    """Greedy ideal ordering (Clarke et al.): at each rank the candidate with the largest gain."""
    counts = np.zeros(coverage.shape[1])
    available = np.ones(coverage.shape[0], dtype=bool)
    gains = []
    for _ in range(min(k, coverage.shape[0])):
        step_gains = np.where(available, coverage @ (1.0 - alpha) ** counts, -np.inf)
        best = int(np.argmax(step_gains))  # first maximum: earlier pool candidates win ties
        gains.append(step_gains[best])
        counts += coverage[best]
        available[best] = False
    return np.asarray(gains)


def alpha_ndcg_at_k(
    ranked: Sequence[SourceEntry],
    gold_ids: Iterable[str],
    k: int,
    alpha: float = 0.5,
    ideal_candidates: Sequence[SourceEntry] | None = None,
) -> float:
    """alpha-NDCG@k over gold-document subtopics; the ideal is greedy over ``ideal_candidates``."""
    k = _check_k(k)
    if not 0.0 <= alpha <= 1.0:
        raise ValueError(f"alpha must lie in [0, 1], got {alpha}")
    subtopics = _unique(gold_ids)
    if not subtopics:
        return math.nan
    gains = _alpha_gains(_coverage(_source_sets(ranked[:k]), subtopics), alpha)
    ideal_entries = _source_sets(subtopics if ideal_candidates is None else ideal_candidates)
    ideal_gains = _ideal_alpha_gains(_coverage(ideal_entries, subtopics), alpha, k)
    ideal = float(ideal_gains @ _discounts(ideal_gains.size))
    if ideal <= 0.0:
        return math.nan
    return float(gains @ _discounts(gains.size)) / ideal


def s_recall_at_k(
    ranked: Sequence[SourceEntry], gold_ids: Iterable[str], k: int, retrievable_ids: Iterable[str] | None = None
) -> float:
    """Share of the retrievable gold documents covered by the top k (all gold when ``retrievable_ids`` is None).

    NaN only when the question has no gold documents; 0.0 when it has some but none is retrievable.
    """
    k = _check_k(k)
    gold = set(gold_ids)
    if not gold:
        return math.nan
    subtopics = gold if retrievable_ids is None else gold & set(retrievable_ids)
    if not subtopics:
        return 0.0
    covered = set().union(*_source_sets(ranked[:k])) & subtopics
    return len(covered) / len(subtopics)


def err_ia_at_k(ranked: Sequence[SourceEntry], gold_ids: Iterable[str], k: int) -> float:
    """Unnormalised intent-aware ERR@k, with uniform intents over the gold documents.

    ERR-IA@k = (1/|T|) sum_t sum_{r<=k} (1/r) R(r, t) prod_{s<r} (1 - R(s, t)), with R(r, t) = 1/2 when
    rank r covers gold document t and 0 otherwise; equivalently (1 / (2 |T|)) G@k with the raw gain
    G@k = sum_{r<=k} (1/r) sum_t J(r, t) (1/2)^(c(r, t)), c(r, t) = ranks above r that cover t.
    The best possible value depends on |T| and on what the pool holds: one gold document found at rank 1
    scores 1/2, three gold documents at ranks 1-3 score (1 + 1/2 + 1/3) / 6 = 0.306, so values are not on
    a common scale across questions with different gold counts (``nerr_ia_at_k`` is).

    TREC's ndeval prints neither this nor one value called ERR-IA: its ``ERR-IA@k`` column is
    G@k / (|T| sum_{i<k} (1/2)^i / (i+1)) (an "ideal ideal" list in which every rank covers every
    intent), that is this value times 2 / sum_{i<k} (1/2)^i / (i+1), about 1.452 at k = 5 (ndeval
    leaves its ``ERR-IA@1`` at G@1, a quirk of its normalising loop); its ``nERR-IA@k`` column is
    ``nerr_ia_at_k``.
    """
    k = _check_k(k)
    intents = _unique(gold_ids)
    if not intents:
        return math.nan
    stop = ERR_STOP_PROBABILITY * _coverage(_source_sets(ranked[:k]), intents)  # (ranks, intents)
    reach = np.cumprod(1.0 - stop, axis=0)
    reach = np.vstack([np.ones((1, len(intents))), reach[:-1]])  # P(user reaches rank r) per intent
    reciprocal_rank = 1.0 / np.arange(1, stop.shape[0] + 1)
    err_per_intent = (reciprocal_rank[:, None] * stop * reach).sum(axis=0)
    return float(err_per_intent.mean())


def _raw_err_gain(coverage: np.ndarray) -> float:
    """ndeval's ERR sum G = sum_r (1/r) sum_t J(r, t) (1/2)^(times t was covered above r)."""
    gains = _alpha_gains(coverage, ERR_STOP_PROBABILITY)
    return float(gains @ (1.0 / np.arange(1, gains.size + 1)))


def nerr_ia_at_k(
    ranked: Sequence[SourceEntry],
    gold_ids: Iterable[str],
    k: int,
    judged: Sequence[SourceEntry] | None = None,
) -> float:
    """nERR-IA@k as TREC's ndeval computes it: ERR-IA@k of ``ranked`` over ERR-IA@k of an ideal ranking.

    nERR-IA@k = G@k(ranked) / G@k(ideal), G the raw gain of ``err_ia_at_k`` (the 1 / (2 |T|) factor
    cancels), so nERR-IA@k = ERR-IA@k(ranked) / ERR-IA@k(ideal). Subtopics are the gold documents, each
    weighted 1 (ndeval has no intent weights: it sums over the subtopics with a positive judgment, here
    every gold document), and a rank counts as relevant to a subtopic whatever its grade (binary).

    The ideal ranking is ndeval's ``idealResult``: greedy over the judged documents of the topic (its
    qrels), at each rank the document with the largest gain sum_t J(d, t) (1/2)^(times t was covered
    already), ranked through the whole judged set and scored at the same depth k. ndeval credits a run
    document only through the qrels, so every entry that earns credit here (a near-duplicate copy, a
    summary node covering several gold documents) is a judged document there. The judged documents are
    therefore ``judged`` (by default ``ranked`` itself; ``selection_metrics`` passes the full retrieved
    pool so every method on a question shares one ideal) plus each gold document that no entry of
    ``judged`` is on its own: the gold documents are judged whether or not any pool retrieved them, so
    unlike alpha-NDCG here a gold document missing from the pool lowers the score. Ties in the greedy
    go to the earliest candidate (ndeval breaks them by docno); with one document per subtopic, which
    is the usual case, no tie changes the value.

    NaN when the question has no gold documents. ndeval stops at depth 20; any k works here.
    """
    k = _check_k(k)
    intents = _unique(gold_ids)
    if not intents:
        return math.nan
    judged_entries = _source_sets(ranked if judged is None else judged)
    singletons = {next(iter(entry)) for entry in judged_entries if len(entry) == 1}
    judged_entries += [frozenset((gold,)) for gold in intents if gold not in singletons]
    ideal_gains = _ideal_alpha_gains(_coverage(judged_entries, intents), ERR_STOP_PROBABILITY, k)
    ideal = float(ideal_gains @ (1.0 / np.arange(1, ideal_gains.size + 1)))
    return _raw_err_gain(_coverage(_source_sets(ranked[:k]), intents)) / ideal
