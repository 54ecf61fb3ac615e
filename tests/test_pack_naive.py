import numpy as np

from harness.pack.base import PackingRequest
from harness.pack.naive import TopKTruncatePacker
from harness.pack.none import NoPacker
from harness.pack.snippets import make_snippets, render_context
from tests.conftest import make_pool


class WordTokens:
    """Whitespace tokens: easy to count by hand."""

    def count(self, text):
        return len(text.split())

    def count_many(self, texts):
        return [self.count(t) for t in texts]

    def truncate(self, text, n):
        return " ".join(text.split()[:n])


def request(budget, pool=None):
    pool = pool or make_pool(n_docs=3, sentences_per_doc=2)
    tokens = WordTokens()
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
