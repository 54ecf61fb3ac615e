"""Selection metrics against hand-worked values on small examples."""

from __future__ import annotations

import math

import numpy as np
import pytest

from harness.metrics.diversity import (
    average_pairwise_distance,
    near_duplicate_fraction,
    selection_metrics,
    vendi_from_gram,
    vendi_score,
)
from harness.metrics.ranking import (
    alpha_ndcg_at_k,
    err_ia_at_k,
    ndcg_at_k,
    nerr_ia_at_k,
    recall_at_k,
    s_recall_at_k,
)
from tests.helpers.reference import vendi_loop
from tests.test_diversify_helpers import pool_from_arrays, unit

# Four unit vectors in the plane: u1 = (1, 0), u2 = (.96, .28), u3 = (.6, .8), u4 = (0, 1).
# Pair cosines: (1,2) .96, (1,3) .6, (1,4) 0, (2,3) .576 + .224 = .8, (2,4) .28, (3,4) .8.
PLANE = np.array([[1.0, 0.0], [0.96, 0.28], [0.6, 0.8], [0.0, 1.0]])

# Gold = {A, B, C}. Selection (k = 5): A, a copy of A, X, B, Y. Full pool: the same plus Z; C is not retrievable.
GOLD = ("A", "B", "C")
SELECTED = [("A",), ("A",), ("X",), ("B",), ("Y",)]
FULL_POOL = SELECTED + [("Z",)]


def test_vendi_of_identical_and_orthonormal_vectors():
    assert vendi_score(np.tile([[0.3, -0.2, 0.9]], (5, 1))) == pytest.approx(1.0, abs=1e-12)
    assert vendi_score(np.eye(6)[:4]) == pytest.approx(4.0, abs=1e-12)
    assert math.isnan(vendi_score(np.zeros((0, 3))))


def test_vendi_hand_worked_plane_example():
    # K = X X^T has the non-zero eigenvalues of X^T X = [[2.2816, .7488], [.7488, 1.7184]]:
    # trace 4, det 2.2816 * 1.7184 - .7488^2 = 3.36, so 2 +- sqrt(4 - 3.36) = 2.8 and 1.2.
    # Eigenvalues of K/4: .7, .3 (and 0, 0). Vendi = exp(-(.7 ln .7 + .3 ln .3)) = 1.8420...
    expected = math.exp(-(0.7 * math.log(0.7) + 0.3 * math.log(0.3)))
    assert vendi_score(PLANE) == pytest.approx(expected, rel=1e-12)
    assert vendi_score(3.0 * PLANE) == pytest.approx(expected, rel=1e-12)  # rows are re-normalised
    assert vendi_loop(PLANE) == pytest.approx(expected, rel=1e-12)


def test_vendi_from_gram_handles_a_stack():
    stack = np.stack([np.ones((3, 3)), np.eye(3)])
    np.testing.assert_allclose(vendi_from_gram(stack), [1.0, 3.0], atol=1e-12)
    with pytest.raises(ValueError, match="square"):
        vendi_from_gram(np.ones((2, 3)))


def test_average_pairwise_distance_and_near_duplicates_hand_worked():
    # Distances 1 - cos: .04, .4, 1, .2, .72, .2 -> sum 2.56 over 6 pairs.
    assert average_pairwise_distance(PLANE) == pytest.approx(2.56 / 6, rel=1e-12)
    # Only (1,2) with cosine .96 exceeds .95; at .8 nothing is *above* the two cosines of exactly .8.
    assert near_duplicate_fraction(PLANE) == pytest.approx(1 / 6)
    assert near_duplicate_fraction(PLANE, threshold=0.7) == pytest.approx(3 / 6)
    assert math.isnan(average_pairwise_distance(PLANE[:1]))
    assert math.isnan(near_duplicate_fraction(PLANE[:1]))
    with pytest.raises(ValueError, match="zero or non-finite norm"):
        average_pairwise_distance(np.array([[1.0, 0.0], [0.0, 0.0]]))


def test_recall_counts_distinct_gold_documents():
    assert recall_at_k(SELECTED, GOLD, 5) == pytest.approx(2 / 3)  # A, B of A, B, C
    assert recall_at_k(SELECTED, GOLD, 3) == pytest.approx(1 / 3)
    assert math.isnan(recall_at_k(SELECTED, (), 5))


def test_ndcg_credits_only_the_first_copy():
    # Gains 1, 0 (copy of A), 0, 1, 0: DCG = 1/log2(2) + 1/log2(5) = 1 + .430677 = 1.430677.
    # Ideal: min(|gold|, k) = 3 ones: 1 + 1/log2(3) + 1/log2(4) = 1 + .630930 + .5 = 2.130930.
    expected = (1 + 1 / math.log2(5)) / (1 + 1 / math.log2(3) + 0.5)
    assert ndcg_at_k(SELECTED, GOLD, 5) == pytest.approx(expected, rel=1e-12)
    assert expected == pytest.approx(0.671386, abs=1e-6)  # 1.430677 / 2.130930
    # A summary covering A and B gains 1 once; B's own document after it gains nothing.
    assert ndcg_at_k([("A", "B"), ("B",)], ("A", "B"), 2) == pytest.approx(1 / (1 + 1 / math.log2(3)))
    assert math.isnan(ndcg_at_k(SELECTED, (), 5))


def test_alpha_ndcg_hand_worked():
    # alpha = .5. Gains: A 1, A again (1 - .5)^1 = .5, X 0, B 1, Y 0.
    # DCG = 1 + .5/log2(3) + 1/log2(5) = 1 + .315465 + .430677 = 1.746142.
    # Greedy ideal over the full pool: A 1, then B 1 (beats the copy's .5), then the copy .5, then 0s:
    # IDCG = 1 + 1/log2(3) + .5/log2(4) = 1 + .630930 + .25 = 1.880930.   alpha-NDCG = .928339.
    expected = (1 + 0.5 / math.log2(3) + 1 / math.log2(5)) / (1 + 1 / math.log2(3) + 0.25)
    assert alpha_ndcg_at_k(SELECTED, GOLD, 5, ideal_candidates=FULL_POOL) == pytest.approx(expected, rel=1e-12)
    assert expected == pytest.approx(0.928339, abs=1e-6)
    # Default ideal: one document per gold id (A, B, C): IDCG = 1 + 1/log2(3) + 1/log2(4).
    default = (1 + 0.5 / math.log2(3) + 1 / math.log2(5)) / (1 + 1 / math.log2(3) + 0.5)
    assert alpha_ndcg_at_k(SELECTED, GOLD, 5) == pytest.approx(default, rel=1e-12)
    # alpha = 1: repeats gain nothing, which is NDCG with first-copy credit.
    assert alpha_ndcg_at_k(SELECTED, GOLD, 5, alpha=1.0) == pytest.approx(ndcg_at_k(SELECTED, GOLD, 5))
    assert math.isnan(alpha_ndcg_at_k(SELECTED, ("C",), 5, ideal_candidates=FULL_POOL))  # C not retrievable


def test_s_recall_counts_only_retrievable_gold():
    retrievable = {s for sources in FULL_POOL for s in sources}
    assert s_recall_at_k(SELECTED, GOLD, 5, retrievable_ids=retrievable) == 1.0  # A, B of the retrievable A, B
    assert s_recall_at_k(SELECTED, GOLD, 3, retrievable_ids=retrievable) == 0.5
    assert s_recall_at_k(SELECTED, GOLD, 5) == pytest.approx(2 / 3)
    # C has left the pool: no retrievable gold scores 0 (the papers' convention), not NaN, so n stays.
    assert s_recall_at_k(SELECTED, ("C",), 5, retrievable_ids=retrievable) == 0.0
    assert math.isnan(s_recall_at_k(SELECTED, (), 5, retrievable_ids=retrievable))  # no gold at all: undefined


def test_mean_s_recall_keeps_questions_whose_gold_left_the_pool():
    # Three questions at k = 2: (1) gold A, B both selected: 1; (2) gold A, C, only A in the pool and
    # selected: 1/1; (3) gold C, not in the pool: 0. Mean over n = 3 is 2/3 (it was 1 over n = 2).
    pool = {"A", "B", "D"}
    scores = [
        s_recall_at_k(["A", "B"], ("A", "B"), 2, retrievable_ids=pool),
        s_recall_at_k(["A", "D"], ("A", "C"), 2, retrievable_ids=pool),
        s_recall_at_k(["A", "D"], ("C",), 2, retrievable_ids=pool),
    ]
    assert scores == [1.0, 1.0, 0.0]
    assert np.mean(scores) == pytest.approx(2 / 3)


def test_err_ia_hand_worked():
    # Stop probability .5 at a covering rank; intents A, B, C weighted 1/3.
    # A: 1/1 * .5 + 1/2 * .5 * (1 - .5) = .625.  B: 1/4 * .5 * 1 = .125.  C: 0.
    # ERR-IA = (.625 + .125 + 0) / 3 = .25.
    assert err_ia_at_k(SELECTED, GOLD, 5) == pytest.approx(0.25, rel=1e-12)
    assert err_ia_at_k(SELECTED, GOLD, 1) == pytest.approx(0.5 / 3)
    assert math.isnan(err_ia_at_k(SELECTED, (), 5))


def test_err_ia_is_unnormalised_and_scales_to_ndevals_err_ia_column():
    # One gold document at rank 1 scores only 1/2: ERR-IA is the expected reciprocal rank itself.
    assert err_ia_at_k(["A"], ("A",), 5) == pytest.approx(0.5)
    # ndeval's ERR-IA@5 column divides the raw gain G@5 by |T| * sum_{i<5} (1/2)^i / (i + 1):
    # for SELECTED, G@5 = 1 + .5/2 + 0 + 1/4 + 0 = 1.5 and the sum is 1 + 1/4 + 1/12 + 1/32 + 1/80 = 1.3770833,
    # so ndeval prints 1.5 / (3 * 1.3770833) = .363086, this ERR-IA (.25) times 2 / 1.3770833.
    ideal_ideal = 1 + 1 / 4 + 1 / 12 + 1 / 32 + 1 / 80
    assert 1.5 / (3 * ideal_ideal) == pytest.approx(err_ia_at_k(SELECTED, GOLD, 5) * 2 / ideal_ideal)
    assert 1.5 / (3 * ideal_ideal) == pytest.approx(0.3630862, abs=1e-7)


def test_nerr_ia_hand_worked():
    # Raw gain G@k = sum_r (1/r) sum_t J(r, t) (1/2)^(times t was covered above r).
    # SELECTED (A, copy of A, X, B, Y): G@5 = 1/1 + .5/2 + 0/3 + 1/4 + 0/5 = 1.5.
    # Judged documents: the pool (A, A', X, B, Y, Z) plus C, a gold document no pool entry holds.
    # Greedy ideal: A (gain 1), B (1), C (1), A' (.5), then zero gains: G@5 = 1 + 1/2 + 1/3 + .5/4 = 47/24.
    # nERR-IA@5 = 1.5 / (47/24) = 36/47 = .76596 (ERR-IA@5 = .25 on the unnormalised scale).
    assert nerr_ia_at_k(SELECTED, GOLD, 5, judged=FULL_POOL) == pytest.approx(36 / 47, rel=1e-12)
    assert nerr_ia_at_k(SELECTED, GOLD, 5) == pytest.approx(36 / 47, rel=1e-12)  # judged defaults to the ranking
    # the same ratio as ERR-IA of the run over ERR-IA of the ideal ranking: (47/24) / (2 * 3) = 47/144
    ideal_ranking = [("A",), ("B",), ("C",), ("A",)]
    assert err_ia_at_k(ideal_ranking, GOLD, 5) == pytest.approx(47 / 144)
    assert nerr_ia_at_k(SELECTED, GOLD, 5) == pytest.approx(0.25 / (47 / 144))
    # k = 1: G@1 = 1 for the run and for the ideal, so 1.0 (the unnormalised ERR-IA@1 is .5 / 3).
    assert nerr_ia_at_k(SELECTED, GOLD, 1) == pytest.approx(1.0)
    # One document per gold id: A, B at ranks 1-2 give G@5 = 1.5; the ideal A, B, C gives 1 + 1/2 + 1/3 = 11/6.
    assert nerr_ia_at_k(["A", "B"], GOLD, 5) == pytest.approx(1.5 / (11 / 6))  # 9/11 = .81818
    assert nerr_ia_at_k(["A", "B", "C"], GOLD, 5) == pytest.approx(1.0)
    assert nerr_ia_at_k(["X", "Y"], GOLD, 5) == 0.0
    # A summary node covering A and B: the run scores G@3 = 2; the judged documents are the node, A and B,
    # and the ideal is the node (gain 2), then A (.5), then B (.5): 2 + .5/2 + .5/3 = 29/12.
    assert nerr_ia_at_k([("A", "B")], ("A", "B"), 1) == pytest.approx(1.0)
    assert nerr_ia_at_k([("A", "B")], ("A", "B"), 3) == pytest.approx(2 / (29 / 12))  # 24/29
    assert math.isnan(nerr_ia_at_k(SELECTED, (), 5))
    with pytest.raises(ValueError, match="positive integer"):
        nerr_ia_at_k(SELECTED, GOLD, 0)


def _ndeval_scores(ranked_rows: list[int], pool: list[tuple[str, ...]], gold: tuple[str, ...]) -> dict[str, float]:
    """pyndeval (TREC's ndeval.c) on one question: the pool entries are the judged documents."""
    pyndeval = pytest.importorskip("pyndeval")
    # Docnos fall as the pool order rises, so ndeval's tie rule (the larger docno) picks the earlier
    # entry, as nerr_ia_at_k does.
    names = [f"d{999 - row:03d}" for row in range(len(pool))]
    qrels = [("q", topic, name, 1) for name, entry in zip(names, pool, strict=True) for topic in entry if topic in gold]
    singletons = {entry[0] for entry in pool if len(entry) == 1}
    qrels += [("q", topic, f"c{99 - j:02d}", 1) for j, topic in enumerate(gold) if topic not in singletons]
    run = [("q", names[row], float(len(ranked_rows) - rank)) for rank, row in enumerate(ranked_rows)]
    measures = [f"{name}@{k}" for name in ("ERR-IA", "nERR-IA") for k in (5, 10, 20)]
    return pyndeval.ndeval(qrels, run, measures=measures)["q"]


def test_err_ia_and_nerr_ia_against_pyndeval_on_the_hand_worked_example():
    scores = _ndeval_scores(list(range(5)), FULL_POOL, GOLD)
    assert scores["nERR-IA@5"] == pytest.approx(36 / 47, rel=1e-12)
    assert scores["ERR-IA@5"] == pytest.approx(0.25 * 2 / (1 + 1 / 4 + 1 / 12 + 1 / 32 + 1 / 80), rel=1e-12)


def test_err_ia_and_nerr_ia_against_pyndeval_on_random_pools():
    rng = np.random.default_rng(7)
    for _ in range(200):
        gold = tuple(f"g{i}" for i in range(int(rng.integers(1, 5))))
        ids = [*gold, "n0", "n1", "n2"]
        pool = [
            tuple(dict.fromkeys(rng.choice(ids, size=int(rng.choice([1, 1, 1, 2, 3])), replace=True).tolist()))
            for _ in range(int(rng.integers(1, 26)))
        ]
        rows = rng.permutation(len(pool))[: int(rng.integers(1, min(len(pool), 20) + 1))].tolist()
        ranked = [pool[row] for row in rows]
        scores = _ndeval_scores(rows, pool, gold)
        for k in (5, 10, 20):
            ideal_ideal = sum(0.5**i / (i + 1) for i in range(k))
            assert nerr_ia_at_k(ranked, gold, k, judged=pool) == pytest.approx(scores[f"nERR-IA@{k}"], abs=1e-12)
            assert err_ia_at_k(ranked, gold, k) * 2 / ideal_ideal == pytest.approx(scores[f"ERR-IA@{k}"], abs=1e-12)


def test_selection_metrics_assembles_every_column():
    embeddings = np.vstack([unit(np.hstack([PLANE, np.zeros((4, 1))])), [[0, 0, 1], [0, 0, 1]]])
    full = pool_from_arrays(embeddings.astype(np.float32), [1.0, 0.0, 0.0], source_ids=FULL_POOL, gold=GOLD)
    selected = full.subset(range(5))
    row = selection_metrics(selected, full, 5)
    assert set(row) == {
        "recall",
        "ndcg",
        "alpha_ndcg",
        "s_recall",
        "err_ia",
        "nerr_ia",
        "apd",
        "vendi",
        "pool_redundancy",
        "gold_in_pool",
    }
    assert row["gold_in_pool"] == 2  # A and B; C never entered the pool
    assert row["recall"] == pytest.approx(2 / 3)
    assert row["ndcg"] == pytest.approx(ndcg_at_k(SELECTED, GOLD, 5))
    assert row["alpha_ndcg"] == pytest.approx(alpha_ndcg_at_k(SELECTED, GOLD, 5, ideal_candidates=FULL_POOL))
    assert row["s_recall"] == 1.0 and row["err_ia"] == pytest.approx(0.25)
    assert row["nerr_ia"] == pytest.approx(36 / 47)  # the ideal is greedy over the pool plus gold document C
    assert row["apd"] == pytest.approx(average_pairwise_distance(embeddings[:5]), rel=1e-6)
    assert row["vendi"] == pytest.approx(vendi_score(embeddings[:5]), rel=1e-6)
    # Full pool pairs above .95: (u1, u2) and the two copies of (0, 0, 1): 2 of 15.
    assert row["pool_redundancy"] == pytest.approx(2 / 15)
    with pytest.raises(ValueError, match="full pool is for"):
        selection_metrics(selected, pool_from_arrays(embeddings, [1.0, 0.0, 0.0], question_id="other"), 5)
