"""One row's context as an HTML fragment with the viewer's provenance marks (harness.report.viewer.markup)."""

from __future__ import annotations

import html
import json
import re

from harness.report.viewer.markup import context_html

SEP = "\n\n"
FIRST = "Paris is the capital of France."
SECOND = "The tower <script>alert(1)</script> in Paris"
THIRD = "A summary: Paris & Lyon"
CONTEXT = SEP.join([FIRST, SECOND, THIRD])


def offsets(text: str) -> tuple[int, int]:
    start = CONTEXT.index(text)
    return start, start + len(text)


def spans_of(word: str) -> list[list[int]]:
    return [[m.start(), m.end()] for m in re.finditer(word, CONTEXT)]


def row() -> tuple[str, str, str]:
    (a0, a1), (b0, b1), (c0, c1) = offsets(FIRST), offsets(SECOND), offsets(THIRD)
    snippets = [
        {"doc": "d1", "title": "France", "cand": "d1", "sents": [0], "tok": 8, "gold": True, "sup": True,
         "ans": True, "cut": False, "kind": "document", "start": a0, "end": a1},
        {"doc": "d1", "title": "", "cand": "d1#copy", "sents": [], "tok": 12, "gold": False, "sup": False,
         "ans": True, "cut": True, "kind": "copy", "copy_of": "d1", "start": b0, "end": b1},
        {"doc": "s7", "docs": ["d1", "d2"], "title": "Cities <b>", "cand": "s7", "sents": [], "tok": 6,
         "gold": False, "sup": None, "ans": True, "cut": False, "kind": "summary", "layer": 2,
         "start": c0, "end": c1},
    ]  # fmt: skip
    return CONTEXT, json.dumps(snippets), json.dumps(spans_of("Paris"))


def test_the_offsets_are_what_the_row_says():
    assert [CONTEXT[a:b] for a, b in spans_of("Paris")] == ["Paris", "Paris", "Paris"]
    start, end = offsets(SECOND)
    assert CONTEXT[start:end] == SECOND


def test_every_answer_span_is_one_mark_and_the_text_is_escaped():
    fragment = context_html(*row())
    assert fragment.count("<mark") == fragment.count("</mark>") == 3
    assert [m for m in re.findall(r'<mark class="answer" data-span="(\d)"[^>]*>([^<]*)</mark>', fragment)] == [
        ("0", "Paris"),
        ("1", "Paris"),
        ("2", "Paris"),
    ]
    assert "<script>" not in fragment and "&lt;script&gt;alert(1)&lt;/script&gt;" in fragment
    assert "</mark> &amp; Lyon" in fragment
    assert "Cities &lt;b&gt;" in fragment and "<b>" not in fragment
    # Only the snippets are shown, as in the viewer: the separators between them are not.
    assert "\n\n" not in fragment


def test_each_snippet_carries_the_viewer_classes_and_badges():
    fragment = context_html(*row())
    classes = re.findall(r'<div class="(snippet[^"]*)"', fragment)
    assert classes == ["snippet kind-document gold supporting", "snippet kind-copy cut", "snippet kind-summary"]
    assert ">France · sent. 0</span>" in fragment  # the source title with the sentences it holds
    assert ">d1</span>" in fragment  # no title: the document id
    assert "gold document</span>" in fragment
    assert "copy of d1</span>" in fragment and "cut by budget</span>" in fragment
    assert "summary L2</span>" in fragment and "supporting</span>" in fragment
    assert fragment.count('class="badge') == 5  # gold, supporting; copy, cut; summary
    # Self-contained: the marks are inline styles, nothing is fetched.
    assert "border-left-color:#2a9d8f" in fragment and "border-left-style:dashed" in fragment
    assert "font-style:italic" in fragment and "background:#e8f6f3" in fragment
    for needle in ("<link", "<style", "src=", "url("):
        assert needle not in fragment


def test_a_span_across_two_snippets_is_marked_in_each():
    context, snippets, _ = row()
    start, end = offsets(FIRST)[1] - len("France."), offsets(SECOND)[0] + len("The")
    fragment = context_html(context, snippets, json.dumps([[start, end]]))
    assert re.findall(r"<mark[^>]*>([^<]*)</mark>", fragment) == ["France.", "The"]


def test_rows_without_provenance_give_the_escaped_plain_context():
    for snippets in (None, float("nan"), "", "not json", "[]"):
        fragment = context_html(CONTEXT, snippets, None)  # type: ignore[arg-type]
        assert fragment.startswith('<div class="context plain"') and "<mark" not in fragment
        body = re.sub(r"^<div[^>]*>|</div>$", "", fragment)
        assert body == html.escape(CONTEXT, quote=True)
    # Answer spans without snippet records are still marked, as the viewer marks a plain context.
    fragment = context_html(CONTEXT, None, json.dumps(spans_of("Paris")))
    assert fragment.count("<mark") == 3 and "<script>" not in fragment
    assert context_html(None, None, None) == context_html("", None, None)  # type: ignore[arg-type]
