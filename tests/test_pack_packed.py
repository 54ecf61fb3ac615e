import numpy as np

from harness.pack.base import PackingRequest
from harness.pack.none import NoPacker
from harness.pack.packed import TopKTruncatePacker
from harness.pack.snippets import make_snippets, render_context
from harness.text.tokens import WordCounter
from tests.conftest import compose_cfg, make_pool


def request(budget, pool=None):
    pool = pool or make_pool(n_docs=3, sentences_per_doc=2)
    tokens = WordCounter()
    snippets = make_snippets(pool, tokens)
    emb = np.eye(len(snippets), 16, dtype=np.float32)
    return PackingRequest(pool.example.question, pool, snippets, emb, pool.query_embedding, budget, tokens)


def test_snippets_keep_source_rank_and_cost():
    req = request(100)
    assert len(req.snippets) == 6
    first = req.snippets[0]
    assert first.tokens == 8  # "Sentence 0 of document i says fact i-0." is 8 words
    assert [s.rank for s in req.snippets] == [0, 0, 1, 1, 2, 2]
    assert all(s.source_ids == (s.cand_id,) for s in req.snippets)


def test_top_k_truncate_by_hand():
    # Each sentence costs 8 words; a separator costs 1. Budget 24 = 8 + 1 + 8 + 1 + 6 (truncated third).
    req = request(24)
    ctx = TopKTruncatePacker().pack(req)
    assert [s.tokens for s in ctx.snippets] == [8, 8, 6]
    assert ctx.snippets[2].text == " ".join(req.snippets[2].text.split()[:6])
    assert len(render_context(ctx.snippets).split()) <= 24
    assert [s.cand_id for s in ctx.snippets[:2]] == [req.pool.candidates[0].cand_id] * 2


def test_top_k_truncate_never_exceeds_budget():
    for budget in range(0, 70, 3):
        req = request(budget)
        ctx = TopKTruncatePacker().pack(req)
        used = sum(s.tokens for s in ctx.snippets) + max(len(ctx.snippets) - 1, 0)
        assert used <= budget


def test_no_packer_keeps_whole_candidates():
    req = request(5)
    ctx = NoPacker().pack(req)
    assert ctx.budget is None and len(ctx.snippets) == 3
    assert ctx.snippets[0].text.startswith(req.pool.candidates[0].title)


def hand_pool(gold=("B",)):
    """Three documents in a fixed rank order: A (5 words), B (8 words), C (2 words), one sentence each."""
    from harness.core.types import Candidate, Document, Example, Pool

    texts = {"A": "a1 a2 a3 a4 a5", "B": "b1 b2 b3 b4 b5 b6 b7 b8", "C": "c1 c2"}
    docs = tuple(Document(d, f"T{d}", (t,)) for d, t in texts.items())
    example = Example("h", "q?", ("b2 b3",), tuple(gold), docs, hops=len(gold))
    candidates = [Candidate(d, t, (d,), f"T{d}", (t,), 1.0 - i / 10) for i, (d, t) in enumerate(texts.items())]
    emb = np.eye(3, 4, dtype=np.float32)
    return Pool(example, candidates, emb, np.eye(1, 4, dtype=np.float32)[0])


def test_misfit_policies_by_hand():
    # Budget 10: A costs 5; B (8) would need 5 + 1 + 8 = 14; C (2) after A costs 5 + 1 + 2 = 8.
    from harness.metrics.context import context_diagnostics

    pool = hand_pool()
    req = request(10, pool)
    truncated = TopKTruncatePacker(misfit="truncate_last").pack(req)
    assert [s.text for s in truncated.snippets] == ["a1 a2 a3 a4 a5", "b1 b2 b3 b4"]  # 10 - 5 - 1 = 4 words left
    assert [s.truncated for s in truncated.snippets] == [False, True]
    assert truncated.extra == {"misfit": "truncate_last", "packed_cost": 10, "fragment_tokens": 4}

    stopped = TopKTruncatePacker(misfit="stop_at_first_misfit").pack(req)
    assert [s.cand_id for s in stopped.snippets] == ["A"]
    assert stopped.extra == {"misfit": "stop_at_first_misfit", "packed_cost": 5, "fragment_tokens": 0}

    skipped = TopKTruncatePacker(misfit="skip_misfits").pack(req)
    assert [s.cand_id for s in skipped.snippets] == ["A", "C"]
    assert skipped.extra == {"misfit": "skip_misfits", "packed_cost": 8, "fragment_tokens": 0}

    # The fragment of gold document B shows the answer to the reader but does not credit B as covered.
    diag = context_diagnostics(truncated, pool.example, render_context(truncated.snippets))
    assert diag["answer_in_context"] == 1.0
    assert diag["gold_doc_coverage"] == 0.0 and diag["all_gold_in_reader"] == 0.0
    assert diag["gold_token_density"] == 4 / 9  # the fragment's 4 of the 9 words shown are gold


def test_whole_gold_snippet_counts_as_coverage():
    from harness.metrics.context import gold_doc_coverage

    # A + B = 5 + 1 + 8 = 14 fit whole; C needs 14 + 1 + 2 = 17 > 16, so one word of it is left: "c1".
    req = request(16, hand_pool(gold=("B", "C")))
    ctx = TopKTruncatePacker(misfit="truncate_last").pack(req)
    assert [(s.cand_id, s.text, s.truncated) for s in ctx.snippets][1:] == [
        ("B", "b1 b2 b3 b4 b5 b6 b7 b8", False),
        ("C", "c1", True),
    ]
    assert ctx.extra["fragment_tokens"] == 1
    assert gold_doc_coverage(ctx, ("B", "C")) == 0.5  # B whole counts, C's fragment does not
    # At 17 the whole of C fits and both gold documents contribute a snippet.
    assert gold_doc_coverage(TopKTruncatePacker().pack(request(17, hand_pool(gold=("B", "C")))), ("B", "C")) == 1.0


def test_legacy_boolean_and_bad_policy():
    import pytest

    assert TopKTruncatePacker(truncate_last=False).misfit == "stop_at_first_misfit"
    with pytest.raises(ValueError, match="misfit must be one of"):
        TopKTruncatePacker(misfit="drop")


def test_every_policy_obeys_the_feasibility_rule():
    from harness.pack.budget import fits

    for misfit in ("truncate_last", "stop_at_first_misfit", "skip_misfits"):
        for budget in range(40):
            ctx = TopKTruncatePacker(misfit=misfit).pack(request(budget, hand_pool()))
            assert fits([s.tokens for s in ctx.snippets], budget)
            assert ctx.extra["packed_cost"] == sum(s.tokens for s in ctx.snippets) + max(len(ctx.snippets) - 1, 0)


def test_packing_experiment_states_its_candidate_set_and_misfit_policy():

    cfg = compose_cfg(["experiment=packing_hotpotqa", "packer=packed"])
    knn = compose_cfg(["experiment=packing_hotpotqa", "diversifier=knn"])
    assert cfg.diversifier.name == "none" and cfg.k == 5 and cfg.budget == 160  # packers see the whole pool
    assert cfg.packer.misfit == "truncate_last"
    assert knn.diversifier.name == "knn" and knn.diversifier.k == 5
