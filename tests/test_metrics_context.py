import math
from collections import Counter

import numpy as np
import pytest

from harness.core.types import Context, Document, Example, Snippet
from harness.metrics import (
    all_gold_in_reader,
    answer_in_context,
    answer_in_context_graded,
    answer_tokens,
    context_diagnostics,
    gold_doc_coverage,
    gold_token_density,
)


def test_answer_in_context_respects_token_boundaries():
    assert answer_in_context("The theatre was built by Shakespeare's company", ["he"]) == 0.0
    assert answer_in_context("Then he built the theatre", ["He"]) == 1.0
    assert answer_in_context("Moonlight over the bay", ["Moon"]) == 0.0


def test_answer_in_context_aliases_and_punctuation():
    assert answer_in_context("She was born in NYC in 1961.", ["New York City", "NYC"]) == 1.0
    assert answer_in_context("France's capital (Paris).", ["Paris"]) == 1.0
    assert answer_in_context("He served in the U.S. Army.", ["the US army"]) == 1.0
    assert answer_in_context("New York is big. City life ...", ["New York City"]) == 0.0  # "is big" breaks the run


def test_answer_in_context_empty_answers():
    assert answer_in_context("anything at all", []) == 0.0
    assert answer_in_context("the the the", ["The"]) == 0.0  # normalises to nothing: cannot be found
    assert answer_in_context("", ["Paris"]) == 0.0


def test_graded_worked_by_hand():
    answer = ["Barack Hussein Obama"]  # 3 tokens -> window of 6
    # [obama, met, his, friend, barack, yesterday]: obama and barack share a 6-token window -> 2/3
    assert answer_in_context_graded("Obama met his friend Barack yesterday", answer) == pytest.approx(2 / 3)
    # obama at 0 and barack at 7 never share a 6-token window -> 1/3
    assert answer_in_context_graded("Obama met his old friend from school Barack", answer) == pytest.approx(1 / 3)
    assert answer_in_context_graded("Michelle met Barack Hussein Obama", answer) == 1.0
    assert answer_in_context_graded("nothing relevant here", answer) == 0.0
    # a context shorter than the window is a single window
    assert answer_in_context_graded("blue red", ["red green blue"]) == pytest.approx(2 / 3)


def test_graded_counts_repeated_tokens_once_each():
    # answer [sing, sing]: one context "sing" covers one answer token only
    assert answer_in_context_graded("they sing a song", ["Sing Sing"]) == pytest.approx(0.5)
    assert answer_in_context_graded("held at sing sing prison", ["Sing Sing"]) == 1.0


def test_graded_takes_max_over_aliases():
    assert answer_in_context_graded("Obama spoke", ["Barack Hussein Obama", "Obama"]) == 1.0
    assert answer_in_context_graded("Obama spoke", []) == 0.0


def _graded_brute_force(context_text, answers):
    ctx = answer_tokens(context_text)
    best = 0.0
    for answer in answers:
        needle = answer_tokens(answer)
        if not needle or not ctx:
            continue
        width = min(2 * len(needle), len(ctx))
        for start in range(len(ctx) - width + 1):
            found = sum((Counter(ctx[start : start + width]) & Counter(needle)).values())
            best = max(best, found / len(needle))
    return best


def test_graded_matches_brute_force_and_dominates_binary():
    rng = np.random.default_rng(7)
    vocab = ["a", "b", "c", "d", "e", "f"]  # "a" is an article: normalisation drops it on both sides
    for _ in range(300):
        context = " ".join(rng.choice(vocab, size=rng.integers(0, 25)))
        answers = [" ".join(rng.choice(vocab, size=rng.integers(1, 5))) for _ in range(rng.integers(1, 3))]
        graded = answer_in_context_graded(context, answers)
        assert graded == pytest.approx(_graded_brute_force(context, answers))
        if answer_in_context(context, answers) == 1.0:
            assert graded == 1.0


def _snippet(text, source_ids, tokens, cand_id="c"):
    return Snippet(text=text, cand_id=cand_id, source_ids=source_ids, tokens=tokens)


@pytest.fixture
def context():
    return Context(
        snippets=[
            _snippet("Paris is in France.", ("d1",), 10, "c1"),
            _snippet("Lyon is a city.", ("d3",), 30, "c3"),
            _snippet("A summary of d1 and d2.", ("d1", "d2"), 20, "s12"),  # a summary node credits both
            _snippet("Unrelated text.", ("d4",), 40, "c4"),
        ],
        budget=128,
        packer="test",
    )


def test_coverage_and_density_by_hand(context):
    assert gold_doc_coverage(context, ("d1", "d5")) == 0.5
    assert all_gold_in_reader(context, ("d1", "d5")) == 0.0
    assert gold_token_density(context, ("d1", "d5")) == pytest.approx((10 + 20) / 100)
    assert gold_doc_coverage(context, ("d1", "d2")) == 1.0
    assert all_gold_in_reader(context, ("d1", "d2")) == 1.0
    assert gold_token_density(context, ("d2", "d4")) == pytest.approx((20 + 40) / 100)
    assert gold_doc_coverage(context, ("d1", "d1")) == 1.0  # a gold id listed twice counts once


def test_coverage_and_density_edge_cases(context):
    assert math.isnan(gold_doc_coverage(context, ()))
    assert math.isnan(all_gold_in_reader(context, ()))
    assert math.isnan(gold_token_density(context, ()))
    empty = Context(snippets=[], budget=64, packer="test")
    assert gold_doc_coverage(empty, ("d1",)) == 0.0
    assert all_gold_in_reader(empty, ("d1",)) == 0.0
    assert gold_token_density(empty, ("d1",)) == 0.0


def test_context_diagnostics_entry_point(context):
    example = Example(
        question_id="q1",
        question="What is the capital of France?",
        answers=("Paris", "City of Light"),
        gold_doc_ids=("d1", "d5"),
        documents=(Document("d1", "Paris", ("Paris is in France.",)),),
    )
    text = "\n".join(s.text for s in context.snippets)
    diagnostics = context_diagnostics(context, example, text)
    assert diagnostics == {
        "answer_in_context": 1.0,
        "answer_in_context_graded": 1.0,
        "gold_doc_coverage": 0.5,
        "all_gold_in_reader": 0.0,
        "gold_token_density": pytest.approx(0.3),
    }
