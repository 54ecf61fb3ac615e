"""The oracle packer against a brute-force enumeration of every snippet subset."""

from __future__ import annotations

from itertools import combinations

import numpy as np
import pytest

from harness.core.types import Candidate, Context, Document, Example, Pool, Snippet
from harness.metrics.context import answer_in_context, gold_doc_coverage
from harness.pack.base import PackingRequest, in_reading_order
from harness.pack.budget import fits
from harness.pack.oracle import OraclePacker
from harness.pack.snippets import render_context
from harness.text.tokens import WordCounter
from tests.conftest import compose_cfg


def build(sentences: list[tuple[str, str]], gold: tuple[str, ...], answers: tuple[str, ...], budget: int):
    """A request whose snippets are ``(doc_id, text)`` pairs in rank order, one document per distinct id."""
    doc_ids = list(dict.fromkeys(d for d, _ in sentences))
    docs = tuple(Document(d, d.upper(), tuple(t for e, t in sentences if e == d)) for d in doc_ids)
    example = Example("o", "q?", answers, gold, docs, hops=len(gold))
    candidates = [Candidate(d.doc_id, d.text, (d.doc_id,), d.title, d.sentences) for d in docs]
    pool = Pool(example, candidates, np.eye(len(docs), 4, dtype=np.float32), np.eye(1, 4, dtype=np.float32)[0])
    tokens = WordCounter()
    snippets, position = [], {}
    for doc_id, text in sentences:
        position[doc_id] = position.get(doc_id, -1) + 1
        snippets.append(
            Snippet(text, doc_id, (doc_id,), tokens.count(text), rank=doc_ids.index(doc_id), position=position[doc_id])
        )
    emb = np.eye(len(snippets), 4, dtype=np.float32)
    return PackingRequest("q?", pool, snippets, emb, pool.query_embedding, budget, tokens)


def brute_force(request: PackingRequest) -> tuple[float, float]:
    """Best (answer-in-context, gold coverage) over every feasible subset, scored on the rendered text."""
    example, snippets = request.pool.example, request.snippets
    best = (0.0, 0.0)
    for r in range(len(snippets) + 1):
        for subset in combinations(range(len(snippets)), r):
            if not fits([snippets[i].tokens for i in subset], request.budget):
                continue
            chosen = in_reading_order([snippets[i] for i in subset])
            context = Context(chosen, request.budget, "brute")
            score = (
                answer_in_context(render_context(chosen), example.answers),
                gold_doc_coverage(context, example.gold_doc_ids),
            )
            best = max(best, score)
    return best


def achieved(request: PackingRequest, context: Context) -> tuple[float, float]:
    example = request.pool.example
    return (
        answer_in_context(render_context(context.snippets), example.answers),
        gold_doc_coverage(context, example.gold_doc_ids),
    )


def test_oracle_by_hand():
    # Budget 8. The answer sits in a 5-word sentence of distractor X; gold G1 and G2 have 2- and 6-word
    # sentences. Best: answer (5) + G1 (2) = 5 + 1 + 2 = 8, coverage 1/2. G1 + G2 = 2 + 1 + 6 = 9 > 8.
    sentences = [("x", "w w zeta w w"), ("g1", "w w"), ("g2", "w w w w w w"), ("g2", "w w w w w w w")]
    request = build(sentences, gold=("g1", "g2"), answers=("zeta",), budget=8)
    context = OraclePacker().pack(request)
    assert [s.text for s in context.snippets] == ["w w zeta w w", "w w"]
    assert achieved(request, context) == (1.0, 0.5) == brute_force(request)
    assert context.extra["oracle_exact"] and context.extra["oracle_answer"] == 1.0
    assert context.extra["oracle_gold_covered"] == 1 and context.extra["packed_cost"] == 8
    # Budget 9 without the answer anywhere: both gold documents (2 + 1 + 6), coverage 1.
    request = build(sentences, gold=("g1", "g2"), answers=("omega",), budget=9)
    context = OraclePacker().pack(request)
    assert achieved(request, context) == (0.0, 1.0) == brute_force(request)


@pytest.mark.parametrize("seed", range(40))
def test_oracle_matches_brute_force_on_random_small_pools(seed):
    rng = np.random.default_rng(seed)
    n_docs = int(rng.integers(2, 5))
    sentences = []
    for _ in range(int(rng.integers(3, 10))):
        doc = f"d{int(rng.integers(n_docs))}"
        words = ["w"] * int(rng.integers(1, 8))
        if rng.random() < 0.25:
            words[int(rng.integers(len(words)))] = "zeta"
        sentences.append((doc, " ".join(words)))
    sentences.sort(key=lambda pair: pair[0])  # rank order: documents by id
    gold = tuple(f"d{i}" for i in rng.choice(n_docs, size=int(rng.integers(1, n_docs + 1)), replace=False))
    request = build(sentences, gold, ("zeta",), budget=int(rng.integers(0, 20)))
    for fill in (True, False):
        context = OraclePacker(fill=fill).pack(request)
        assert fits([s.tokens for s in context.snippets], request.budget)
        assert context.extra["oracle_exact"]
        assert achieved(request, context) == brute_force(request)


def test_fill_uses_the_rest_of_the_budget_and_the_cap_falls_back_to_greedy():
    sentences = [("x", "w w zeta w w"), ("g1", "w w"), ("y", "w w w"), ("g2", "w w w w w w")]
    request = build(sentences, gold=("g1", "g2"), answers=("zeta",), budget=12)
    # Core: answer (5) + G1 (2) + G2 (6) = 15 > 12, so answer + G1 = 8; fill adds y: 8 + 1 + 3 = 12.
    filled = OraclePacker().pack(request)
    assert [s.cand_id for s in filled.snippets] == ["x", "g1", "y"] and filled.extra["packed_cost"] == 12
    assert [s.cand_id for s in OraclePacker(fill=False).pack(request).snippets] == ["x", "g1"]
    # Three signatures (answer, g1, g2) and |gold| + 1 = 3: subsets of size <= 3 of 3 = 8 > cap 5.
    greedy = OraclePacker(max_subsets=5, fill=False).pack(request)
    assert greedy.extra["oracle_exact"] is False and greedy.extra["oracle_subsets"] == 8
    assert [s.cand_id for s in greedy.snippets] == ["x", "g1"]  # cheapest answer, then most gold per token


def test_oracle_config_builds():
    from hydra.utils import instantiate

    cfg = compose_cfg(["packer=oracle"])
    packer = instantiate(cfg.packer)
    assert isinstance(packer, OraclePacker) and packer.name == "oracle" and packer.max_subsets == 100_000
