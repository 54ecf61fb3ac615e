"""Provenance of the packed context: snippet records, answer spans and the pool, against hand-built cases."""

from __future__ import annotations

import json

import numpy as np

from harness.core.types import Candidate, Context, Document, Example, Pool, Snippet
from harness.metrics.context import answer_in_context
from harness.metrics.provenance import (
    answer_spans,
    context_columns,
    merged_spans,
    pool_column,
    pool_records,
    snippet_records,
)


def test_answer_spans_cover_the_words_of_each_normalised_match():
    text = "The Eiffel Tower is in Paris.\nParis, France, is big."
    # "paris" occurs twice; "Paris France" once (over the comma): the second "Paris," merges with it.
    assert answer_spans(text, ["Paris"]) == [[23, 28], [30, 35]]
    assert answer_spans(text, ["Paris", "paris france"]) == [[23, 28], [30, 43]]
    # Articles and punctuation are dropped as answer-in-context drops them: "the tower" is not "Tower is".
    assert answer_spans(text, ["an Eiffel tower"]) == [[4, 16]]
    assert answer_spans(text, ["London"]) == [] and answer_in_context(text, ["London"]) == 0.0
    assert answer_spans("anything", ["the"]) == []  # an answer that normalises to nothing matches nothing


def example_and_pool() -> tuple[Example, Pool]:
    documents = (
        Document("d0", "Alpha", ("Alpha is in Paris.", "It is old.")),
        Document("d1", "Beta", ("Beta is a band.",)),
    )
    example = Example(
        "q",
        "Where?",
        ("Paris",),
        ("d0",),
        documents,
        metadata={"supporting_sentences": (("d0", 0),)},
    )
    candidates = [
        Candidate("d0", "Alpha is in Paris. It is old.", ("d0",), "Alpha", documents[0].sentences, 0.9),
        Candidate("copy0:d0", "It is old. Alpha is in Paris.", ("d0",), "Alpha", ("It is old.", "Alpha is in Paris."),
                  0.8, "copy"),
        Candidate("tree:1:0", "A summary about Paris.", ("d0", "d1"), "", ("A summary about Paris.",), 0.7, "summary",
                  1),
        Candidate("d1", "Beta is a band.", ("d1",), "Beta", documents[1].sentences, 0.1),
    ]  # fmt: skip
    pool = Pool(example, candidates, np.zeros((4, 2), np.float32), np.zeros(2, np.float32))
    return example, pool


def test_snippet_records_say_where_each_piece_came_from():
    example, pool = example_and_pool()
    snippets = [
        Snippet("Alpha is in Paris.", "d0", ("d0",), 5, "Alpha", 0),
        Snippet("It is old.", "copy0:d0", ("d0",), 4, "Alpha", 0),
        Snippet("A summary about Paris.", "tree:1:0", ("d0", "d1"), 6, "", 0),
        Snippet("Beta is", "d1", ("d1",), 2, "Beta", 0, truncated=True),
    ]
    text = "\n".join(s.text for s in snippets)
    records = snippet_records(Context(snippets, 20, "test"), text, pool, example)
    assert [text[r["start"] : r["end"]] for r in records] == [s.text for s in snippets]
    first, copy, summary, cut = records
    assert first == {
        "doc": "d0", "title": "Alpha", "cand": "d0", "sents": [0], "tok": 5, "gold": True, "sup": True, "ans": True,
        "cut": False, "kind": "document", "start": 0, "end": 18,
    }  # fmt: skip
    assert (copy["kind"], copy["copy_of"], copy["sents"], copy["sup"], copy["ans"]) == ("copy", "d0", [1], False, False)
    assert (summary["kind"], summary["layer"], summary["docs"], summary["sents"]) == ("summary", 1, ["d0", "d1"], [])
    assert summary["ans"] and summary["gold"]
    assert (cut["cut"], cut["sents"], cut["gold"]) == (True, [], False)


def test_support_is_null_where_the_dataset_marks_it_per_paragraph_only():
    example, pool = example_and_pool()
    paragraph_level = Example(**{**example.__dict__, "metadata": {"supporting_sentences": None}})
    snippets = [Snippet("Alpha is in Paris.", "d0", ("d0",), 5, "Alpha", 0)]
    (record,) = snippet_records(Context(snippets, 20, "t"), snippets[0].text, pool, paragraph_level)
    assert record["sup"] is None and record["gold"] is True


def test_pool_records_mark_what_the_diversifier_kept():
    example, pool = example_and_pool()
    records = pool_records(pool, ["d0", "tree:1:0"], example)
    assert [(r["id"], r["kept"], r["gold"], r["ans"]) for r in records] == [
        ("d0", True, True, True),
        ("copy0:d0", False, True, True),
        ("tree:1:0", True, True, True),
        ("d1", False, False, False),
    ]
    assert records[2]["layer"] == 1 and "layer" not in records[0]


def test_the_columns_are_compact_json():
    example, pool = example_and_pool()
    snippets = [Snippet("Alpha is in Paris.", "d0", ("d0",), 5, "Alpha", 0)]
    columns = {
        **context_columns(Context(snippets, 20, "t"), snippets[0].text, pool),
        **pool_column(pool, pool.subset([0])),
    }
    assert set(columns) == {"snippets", "answer_spans", "pool"}
    assert json.loads(columns["answer_spans"]) == [[12, 17]]
    assert ", " not in columns["pool"] and sum(r["kept"] for r in json.loads(columns["pool"])) == 1


def reference_answer_spans(text: str, answers: list[str]) -> list[list[int]]:
    """Every token of the whole text with its word's span, every window compared: the definition, slowly."""
    import re
    import string

    from harness.metrics.answers import answer_tokens, normalize_answer

    tokens = []
    for m in re.finditer(r"\S+", text):
        word = m.group()
        start = m.start() + len(word) - len(word.lstrip(string.punctuation))
        end = max(m.end() - (len(word) - len(word.rstrip(string.punctuation))), start)
        tokens.extend((t, start, end) for t in normalize_answer(word).split())
    found = []
    for answer in answers:
        needle = answer_tokens(answer)
        n = len(needle)
        found += [
            (tokens[i][1], tokens[i + n - 1][2])
            for i in range(len(tokens) - n + 1)
            if n and [t for t, _, _ in tokens[i : i + n]] == needle
        ]
    return merged_spans(found)  # merging is checked by hand in the first test


def test_answer_spans_equal_the_definition_on_random_multi_line_texts():
    rng = np.random.default_rng(7)
    vocabulary = ["Paris", "paris,", "France.", "the", "(Paris)", "New", "York", "new-york", "A", "--", "", "\n", " "]
    answers = ["Paris", "New York", "paris france", "the", "York Paris New", "--"]
    for _ in range(300):
        words = rng.choice(vocabulary, size=int(rng.integers(0, 30)))
        text = "".join(w + str(rng.choice(["\n", " ", "  ", "\n\n"])) for w in words)
        chosen = [str(a) for a in rng.choice(answers, size=int(rng.integers(1, 4)))]
        assert answer_spans(text, chosen) == reference_answer_spans(text, chosen), (text, chosen)
