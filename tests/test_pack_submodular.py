"""The submodular packer against hand-worked values, a plain-loop reference and a brute-force greedy."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from harness.core.types import Example, Pool, Snippet
from harness.pack.base import PackingRequest
from harness.pack.budget import fits
from harness.pack.submod import (
    TERMS,
    SubmodularObjective,
    SubmodularPacker,
    cost_scaled_greedy,
)
from harness.text.tokens import WordCounter
from tests.helpers.packing import random_request
from tests.helpers.reference import reference_greedy, reference_inputs, reference_objective


def request_from(question, texts, embeddings, budget, docs=None, costs=None) -> PackingRequest:
    tokens = WordCounter()
    docs = docs or [f"d{i}" for i in range(len(texts))]
    embeddings = np.asarray(embeddings, dtype=np.float32)
    snippets = [
        Snippet(
            text=t,
            cand_id=d,
            source_ids=(d,),
            tokens=tokens.count(t) if costs is None else int(costs[i]),
            position=i,
            rank=int(d[1:]) if d[1:].isdigit() else 0,
        )
        for i, (t, d) in enumerate(zip(texts, docs, strict=False))
    ]
    query = np.zeros(embeddings.shape[1], dtype=np.float32)
    query[0] = 1.0
    example = Example(question_id="q", question=question, answers=("a",), gold_doc_ids=(), documents=())
    pool = Pool(example=example, candidates=[], embeddings=embeddings[:0], query_embedding=query)
    return PackingRequest(question, pool, snippets, embeddings, query, budget, tokens)


def small_random_request(seed: int, n: int | None = None, budget: int | None = None) -> PackingRequest:
    rng = np.random.default_rng(seed)
    n = n or int(rng.integers(2, 25))
    budget = budget if budget is not None else int(rng.integers(0, 120))
    return random_request(rng, n_snippets=n, dim=16, budget=budget, n_documents=int(rng.integers(1, 6)))


# ---- hand-worked objective ---------------------------------------------------------------------
def test_objective_terms_match_hand_computed_values():
    # query terms {alpha, beta}; s0 and s1 share an embedding, s2 is orthogonal; s0, s1 in doc A
    request = request_from(
        "alpha beta?",
        ["alpha gamma", "beta", "delta"],
        [[1, 0], [1, 0], [0, 1]],
        budget=100,
        docs=["dA", "dA", "dB"],
    )
    packer = SubmodularPacker("submod", w_rel=1, w_qry=1, w_cov=1, w_div=1, alpha=0.5)
    objective = packer.objective(request)
    # rel = [1/2, 1/2, 0] -> Rel(V) = 1; QueryCov(V) = 2; deg = [2, 2, 1], cap = [1, 1, .5] -> Repr(V) = 2.5;
    # Div(V) = sqrt(1/2 + 1/2) + sqrt(0) = 1
    values = objective.term_values([0])
    assert values["rel"] == pytest.approx(0.5)
    assert values["qry"] == pytest.approx(0.5)
    assert values["cov"] == pytest.approx(2.0 / 2.5)  # coverage [1, 1, 0] capped at [1, 1, .5]
    assert values["div"] == pytest.approx(math.sqrt(0.5))
    values = objective.term_values([0, 2])
    assert values["cov"] == pytest.approx(1.0)  # every row saturated
    assert objective.value([0, 1, 2]) == pytest.approx(4.0)  # each normalised term is 1 on V
    assert objective.value([]) == 0.0


def test_zero_terms_are_dropped_not_divided_by_zero():
    # no query content terms: Rel, QueryCov and Div are 0 on V and contribute nothing
    request = request_from("the of?", ["alpha", "beta"], [[1, 0], [0, 1]], budget=10)
    objective = SubmodularPacker("submod").objective(request)
    values = objective.term_values([0])
    assert values["rel"] == values["qry"] == values["div"] == 0.0
    assert values["cov"] > 0.0


# ---- against the plain-loop reference and the brute-force greedy ---------------------------------
@pytest.mark.parametrize("seed", range(40))
def test_vectorised_greedy_matches_plain_loop_reference(seed):
    rng = np.random.default_rng(1000 + seed)
    request = small_random_request(seed)
    packer = SubmodularPacker(
        "submod",
        w_rel=float(rng.uniform(0, 2)),
        w_qry=float(rng.uniform(0, 2)),
        w_cov=float(rng.uniform(0, 2)),
        w_div=float(rng.uniform(0, 2)),
        alpha=float(rng.uniform(0.05, 1.5)),
        max_snippets=[None, 3, 32][seed % 3],
        diversity_relevance=["lexical", "cosine"][seed % 2],
    )
    chosen, extra = packer.select(request)
    expected, fallback = reference_greedy(
        reference_inputs(request, packer), request.costs.tolist(), request.budget, packer.max_snippets
    )
    assert chosen == expected
    assert extra["singleton_fallback"] == fallback
    reference_value = reference_objective(reference_inputs(request, packer), chosen)
    assert extra["objective"] == pytest.approx(reference_value, abs=1e-9)


def brute_force_greedy(objective_value, costs, budget, max_snippets=None):
    """The same rule with every marginal gain recomputed from scratch as F(S + x) - F(S)."""
    n = len(costs)
    chosen: list[int] = []
    limit = n if max_snippets is None else max_snippets
    while len(chosen) < limit:
        base = objective_value(chosen)
        best, best_ratio = None, -math.inf
        for x in range(n):
            if x in chosen or not fits([costs[i] for i in chosen] + [costs[x]], budget):
                continue
            gain = objective_value(chosen + [x]) - base
            if gain > 1e-12 and gain / max(costs[x], 1) > best_ratio:
                best, best_ratio = x, gain / max(costs[x], 1)
        if best is None:
            break
        chosen.append(best)
    singles = [(objective_value([s]), s) for s in range(n) if fits([costs[s]], budget)]
    if singles:
        value, single = max(singles, key=lambda vs: (vs[0], -vs[1]))
        if value > objective_value(chosen) + 1e-12:
            return [single]
    return chosen


@pytest.mark.parametrize("seed", range(25))
def test_greedy_matches_brute_force_rule(seed):
    request = small_random_request(seed, n=8)
    packer = SubmodularPacker("submod", max_snippets=None)
    chosen, _ = packer.select(request)
    inputs = reference_inputs(request, packer)
    expected = brute_force_greedy(lambda s: reference_objective(inputs, s), request.costs.tolist(), request.budget)
    assert chosen == expected


def test_incremental_value_equals_set_value():
    request = small_random_request(3, n=20, budget=80)
    packer = SubmodularPacker("submod")
    objective = packer.objective(request)
    result = cost_scaled_greedy(objective, request.costs, request.budget)
    assert result.greedy_value == pytest.approx(objective.value(result.greedy_chosen), abs=1e-12)


# ---- the best-singleton fallback -----------------------------------------------------------------
def test_singleton_fallback_beats_many_cheap_poor_snippets():
    n_cheap = 30
    question = "alpha beta gamma?"
    texts = ["alpha beta gamma " + " ".join(["filler"] * 197)] + [f"noise{k}" for k in range(n_cheap)]
    embeddings = np.eye(n_cheap + 1, dtype=np.float32)  # orthogonal: deg_i = 1
    costs = [200] + [1] * n_cheap
    request = request_from(question, texts, embeddings, budget=200, costs=costs)
    packer = SubmodularPacker("submod")  # w = 1.0 / 0.5 / 0.4 / 0.3, alpha = 0.3
    context = packer.pack(request)
    # A cheap snippet gains 0.4 * 0.3 / (0.3 * 31) = 0.4 / 31 per token; the expensive one
    # (1 + 0.5 + 0.4 / 31 + 0.3) / 200 per token, so the greedy fills up on cheap ones first.
    assert context.extra["singleton_fallback"] is True
    assert [s.text for s in context.snippets] == [texts[0]]
    assert context.extra["greedy_objective"] == pytest.approx(n_cheap * 0.4 / 31)
    assert context.extra["objective"] == pytest.approx(1.0 + 0.5 + 0.4 / 31 + 0.3)


def test_no_fallback_when_greedy_set_is_better():
    texts = ["alpha", "beta", "gamma", "alpha beta gamma " + " ".join(["x"] * 50)]
    request = request_from("alpha beta gamma?", texts, np.eye(4, dtype=np.float32), budget=10)
    context = SubmodularPacker("submod").pack(request)
    assert context.extra["singleton_fallback"] is False
    assert sorted(s.text for s in context.snippets) == ["alpha", "beta", "gamma"]


# ---- monotone submodularity of every term --------------------------------------------------------
@pytest.mark.parametrize("seed", range(30))
@pytest.mark.parametrize("diversity", ["lexical", "cosine"])
def test_each_term_is_monotone_and_submodular(seed, diversity):
    rng = np.random.default_rng(seed)
    request = small_random_request(seed, n=12, budget=100)
    packer = SubmodularPacker(
        "submod", w_rel=1, w_qry=1, w_cov=1, w_div=1, alpha=float(rng.uniform(0.1, 1.2)), diversity_relevance=diversity
    )
    objective = packer.objective(request)
    n = len(request.snippets)
    for _ in range(40):
        big = set(np.flatnonzero(rng.random(n) < 0.5).tolist())
        small = {i for i in big if rng.random() < 0.5}
        outside = [x for x in range(n) if x not in big]
        if not outside:
            continue
        x = int(rng.choice(outside))
        f_small, f_big = objective.term_values(small), objective.term_values(big)
        f_small_x, f_big_x = objective.term_values(small | {x}), objective.term_values(big | {x})
        for term in TERMS:
            assert f_small[term] <= f_big[term] + 1e-12, term  # monotone
            assert f_small_x[term] - f_small[term] >= f_big_x[term] - f_big[term] - 1e-12, term  # diminishing


def test_vectorised_gains_equal_set_differences():
    request = small_random_request(11, n=15, budget=100)
    objective = SubmodularPacker("submod").objective(request)
    state = objective.empty_state()
    for index in [4, 9, 1]:
        gains = objective.gains(state)
        base = objective.value(state.chosen)
        outside = [x for x in range(objective.n) if x not in state.chosen]  # the greedy masks the rest
        expected = [objective.value(state.chosen + [x]) - base for x in outside]
        np.testing.assert_allclose(gains[outside], expected, atol=1e-12)
        per_term = objective.term_gains(state)
        np.testing.assert_allclose(sum(per_term.values()), gains, atol=1e-12)
        objective.add(state, index, float(gains[index]))


# ---- budget and output shape --------------------------------------------------------------------
@pytest.mark.parametrize("seed", range(60))
def test_submodular_never_exceeds_budget(seed):
    request = small_random_request(seed)
    packer = SubmodularPacker("submod", max_snippets=[None, 2, 32][seed % 3])
    context = packer.pack(request)
    costs = [s.tokens for s in context.snippets]
    assert fits(costs, request.budget)
    assert context.budget == request.budget and context.packer == "submod"
    assert [(s.rank, s.position) for s in context.snippets] == sorted((s.rank, s.position) for s in context.snippets)
    if packer.max_snippets is not None:
        assert len(context.snippets) <= packer.max_snippets


def test_exhaustive_small_case_greedy_within_guarantee():
    # the greedy-or-singleton answer is at least (1 - 1/e)/2 of the true optimum under a knapsack
    for seed in range(10):
        request = small_random_request(seed, n=7, budget=30)
        packer = SubmodularPacker("submod", max_snippets=None)
        objective = packer.objective(request)
        _, extra = packer.select(request)
        costs = request.costs.tolist()
        best = max(
            objective.value(list(s))
            for r in range(len(costs) + 1)
            for s in itertools.combinations(range(len(costs)), r)
            if fits([costs[i] for i in s], request.budget)
        )
        assert extra["objective"] >= (1 - 1 / math.e) / 2 * best - 1e-12


def test_empty_request_and_validation():
    request = request_from("alpha?", [], np.zeros((0, 4)), budget=10)
    context = SubmodularPacker("submod").pack(request)
    assert context.snippets == [] and context.extra["objective"] == 0.0
    with pytest.raises(ValueError, match="w_cov"):
        SubmodularPacker("submod", w_cov=-1)
    with pytest.raises(ValueError, match="alpha"):
        SubmodularPacker("submod", alpha=0)
    with pytest.raises(ValueError, match="'dense'"):
        SubmodularPacker("submod", diversity_relevance="dense")
    with pytest.raises(ValueError, match="max_snippets"):
        SubmodularPacker("submod", max_snippets=0)


def test_objective_rejects_negative_relevance():
    with pytest.raises(ValueError, match="non-negative"):
        SubmodularObjective(
            np.array([-0.1]), np.zeros((1, 0), bool), np.ones((1, 1)), np.zeros(1, int), dict.fromkeys(TERMS, 1.0)
        )


# ---- the choices the method leaves open (rel, normalise, cost_scaled) -----------------------------
def only(**weights) -> dict:
    return {f"w_{t}": float(weights.get(t, 0.0)) for t in TERMS}


def chosen_texts(packer: SubmodularPacker, request: PackingRequest) -> list[str]:
    return sorted(s.text for s in packer.pack(request).snippets)


def test_bm25_relevance_matches_hand_computed_values():
    from harness.pack.lexical import bm25_relevance

    texts = ["alpha beta", "alpha alpha alpha", "beta", "beta", "beta"]
    scores = bm25_relevance({"alpha", "beta"}, texts)
    # N = 5, df(alpha) = 2, df(beta) = 4, lengths [2, 3, 1, 1, 1] (mean 1.6), k1 = 1.5, b = 0.75
    idf_alpha, idf_beta = math.log(1 + 3.5 / 2.5), math.log(1 + 1.5 / 4.5)

    def saturation(tf, length):
        return tf * 2.5 / (tf + 1.5 * (0.25 + 0.75 * length / 1.6))

    assert scores[0] == pytest.approx(saturation(1, 2) * (idf_alpha + idf_beta))
    assert scores[1] == pytest.approx(saturation(3, 3) * idf_alpha)
    assert scores[2] == pytest.approx(saturation(1, 1) * idf_beta)
    assert np.all(scores >= 0)
    assert bm25_relevance(set(), texts).tolist() == [0.0] * 5


def test_rel_kind_changes_the_selection():
    # lexical: "alpha beta" holds both query terms (1 vs 0.5); bm25: "beta" is in 4 of 5 snippets (low
    # idf) and "alpha alpha alpha" scores 1.197 against 1.046 (see the test above); dense: only
    # "beta" (s2) points along the question's embedding
    texts = ["alpha beta", "alpha alpha alpha", "beta", "beta", "beta"]
    embeddings = [[0, 1], [0, 1], [1, 0], [0, 1], [0, 1]]
    request = request_from("alpha beta?", texts, embeddings, budget=100, costs=[5] * 5)
    picks = {
        rel: chosen_texts(SubmodularPacker("submod", **only(rel=1), max_snippets=1, rel=rel), request)
        for rel in ("lexical", "bm25", "dense")
    }
    assert picks == {"lexical": ["alpha beta"], "bm25": ["alpha alpha alpha"], "dense": ["beta"]}


def test_normalise_none_changes_the_selection():
    # Rel(V) = 1; three identical "zeta" snippets make Repr(V) = 1 + 3 * 3 = 10 (alpha = 1: no saturation).
    # Normalised: F({alpha}) = 1 + 1/10 beats F({zeta}) = 0 + 3/10; raw: 1 + 1 = 2 loses to 0 + 3 = 3.
    texts = ["alpha", "zeta", "zeta", "zeta"]
    embeddings = [[0, 1], [1, 0], [1, 0], [1, 0]]
    request = request_from("alpha?", texts, embeddings, budget=100, costs=[5] * 4)
    common = dict(**only(rel=1, cov=1), alpha=1.0, max_snippets=1)
    assert chosen_texts(SubmodularPacker("submod", **common), request) == ["alpha"]
    assert chosen_texts(SubmodularPacker("submod", **common, normalise="ground_set"), request) == ["alpha"]
    assert chosen_texts(SubmodularPacker("submod", **common, normalise="none"), request) == ["zeta"]


def test_cost_scaled_off_changes_the_selection():
    # Rel only: gains .5 ("alpha beta", 10 tokens), .25 and .25 ("alpha", "beta", 3 tokens each), budget 10.
    # Per token the two cheap ones come first (7 tokens with the separator; the dear one no longer fits, and
    # alone it scores .5, no more than the pair); by gain the dear one comes first and fills the budget.
    texts = ["alpha beta", "alpha", "beta"]
    request = request_from("alpha beta?", texts, np.eye(3, dtype=np.float32), budget=10, costs=[10, 3, 3])
    assert chosen_texts(SubmodularPacker("submod", **only(rel=1)), request) == ["alpha", "beta"]
    assert chosen_texts(SubmodularPacker("submod", **only(rel=1), cost_scaled=False), request) == ["alpha beta"]


@pytest.mark.parametrize("seed", range(10))
def test_explicit_defaults_are_the_published_method(seed):
    request = small_random_request(seed, budget=80)
    explicit = SubmodularPacker("submod", rel="lexical", normalise="ground_set", cost_scaled=True)
    baseline = SubmodularPacker("submod")
    assert explicit.pack(request).extra == baseline.pack(request).extra
    # and the defaults are still the plain-loop reference the vectorised greedy is checked against
    inputs = reference_inputs(request, baseline)
    assert baseline.select(request)[0] == reference_greedy(inputs, request.costs.tolist(), request.budget, 32)[0]


def test_open_choices_are_validated():
    with pytest.raises(ValueError, match="rel"):
        SubmodularPacker("submod", rel="tfidf")
    with pytest.raises(ValueError, match="normalise"):
        SubmodularPacker("submod", normalise="by_max")
