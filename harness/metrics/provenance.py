"""Where each piece of the reader's context came from, kept in the row beside the rendered context.

Three row columns, each a JSON list (rows hold scalars: ``harness.core.stage.scalar``):

- ``snippets``: the packed context in reading order, one record per snippet: ``doc`` (its source document;
  ``docs`` lists every source of a summary), ``title``, ``cand`` (the candidate it was cut from), ``sents``
  (indices of the document sentences it holds whole, :func:`harness.metrics.support.snippet_sentences`),
  ``tok`` (reader tokens), ``gold`` (from a gold document), ``sup`` (holds a supporting sentence; null where
  the dataset marks support per paragraph only), ``ans`` (holds a gold answer, normalised as
  answer-in-context counts it), ``cut`` (the fragment a budget cut), ``kind`` (document, chunk, summary,
  copy), ``layer`` (a summary node's tree layer), ``copy_of`` (an injected copy's source document) and
  ``start``/``end`` (its characters in the rendered context).
- ``answer_spans``: ``[start, end]`` character spans of the context where a gold answer occurs, found on the
  normalised tokens of :func:`harness.metrics.answers.normalize_answer`; non-empty exactly when
  ``answer_in_context`` is 1 (short of an answer that straddles two snippets).
- ``pool``: the candidates the diversifier chose from, in rank order: ``id``, ``title``, ``score``,
  ``gold``, ``ans`` (holds a gold answer), ``kind``, ``layer`` and ``kept`` (the diversifier kept it).
"""

from __future__ import annotations

import bisect
import functools
import json
import re
import string
from collections.abc import Iterable, Sequence
from typing import Any

from harness.core.types import Context, Example, Pool
from harness.metrics.answers import answer_tokens, as_answer_list, normalize_answer
from harness.metrics.context import answer_in_context
from harness.metrics.support import snippet_sentences

SNIPPETS = "snippets"
ANSWER_SPANS = "answer_spans"
POOL = "pool"
PROVENANCE_COLUMNS = (SNIPPETS, ANSWER_SPANS, POOL)

_WORD = re.compile(r"\S+")


@functools.lru_cache(maxsize=1 << 16)
def _word_tokens(word: str) -> tuple[tuple[str, ...], int, int]:
    """A word's normalised answer tokens and the punctuation characters before and after it. Memoised: the
    contexts a sweep packs from one pool repeat the same words across packers, budgets and seeds (normalising
    every word again was most of the time of marking a context's answer spans)."""
    lead = len(word) - len(word.lstrip(string.punctuation))
    trail = len(word) - len(word.rstrip(string.punctuation))
    return tuple(normalize_answer(word).split()), lead, trail


@functools.lru_cache(maxsize=1 << 15)
def _line_offsets(line: str) -> tuple[tuple[str, ...], tuple[tuple[int, int], ...]]:
    """The normalised answer tokens of one line of text, and the character span (in the line) of the word each
    came from. Memoised by line: a context renders one snippet a line, and a sweep renders the same snippets
    into the contexts of every packer, budget and seed.

    Normalisation never joins or splits across whitespace, so the tokens of the words, in order, are the
    tokens of the whole line."""
    tokens: list[str] = []
    spans: list[tuple[int, int]] = []
    for m in _WORD.finditer(line):
        words, lead, trail = _word_tokens(m.group())
        # The span leaves out the punctuation around the word ("Paris," marks "Paris").
        start, end = m.start() + lead, m.end() - trail
        tokens.extend(words)
        spans.extend([(start, max(end, start))] * len(words))
    return tuple(tokens), tuple(spans)


def _run_starts(words: list[str], needle: list[str]) -> list[int]:
    """Every index at which ``needle`` occurs in ``words`` as a contiguous run (the scan for its first token
    runs in C)."""
    starts, first, n, i = [], needle[0], len(needle), -1
    while True:
        try:
            i = words.index(first, i + 1)
        except ValueError:
            return starts
        if words[i : i + n] == needle:
            starts.append(i)


def answer_spans(text: str, answers: str | Iterable[str]) -> list[list[int]]:
    """Character spans of ``text`` holding a gold answer or alias as a run of normalised tokens, in order,
    overlapping spans merged."""
    lines = text.split("\n")  # words never cross a newline: each line's tokens are found (and kept) alone
    words: list[str] = []
    first_token: list[int] = []  # index in ``words`` of each line's first token
    first_char: list[int] = []  # index in ``text`` of each line's first character
    cursor = 0
    for line in lines:
        first_token.append(len(words))
        first_char.append(cursor)
        words.extend(_line_offsets(line)[0])
        cursor += len(line) + 1

    def char_span(i: int) -> tuple[int, int]:
        # An empty line shares its first token index with the next line: the rightmost is the holder.
        j = bisect.bisect_right(first_token, i) - 1
        start, end = _line_offsets(lines[j])[1][i - first_token[j]]
        return start + first_char[j], end + first_char[j]

    found: list[tuple[int, int]] = []
    for answer in as_answer_list(answers):
        needle = answer_tokens(answer)
        if needle:
            found.extend((char_span(i)[0], char_span(i + len(needle) - 1)[1]) for i in _run_starts(words, needle))
    return merged_spans(found)


def merged_spans(spans: Iterable[tuple[int, int]]) -> list[list[int]]:
    """``[start, end]`` spans in order, those that overlap or touch merged into one."""
    merged: list[list[int]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return merged


def _supporting(example: Example) -> set[tuple[str, int]] | None:
    sentences = example.metadata.get("supporting_sentences")
    return None if sentences is None else {(d, int(i)) for d, i in sentences}


def snippet_records(
    context: Context, text: str, pool: Pool, example: Example, spans: list[list[int]] | None = None
) -> list[dict[str, Any]]:
    """One provenance record per snippet of ``context`` (rendered as ``text``), in order; ``spans``: the
    text's :func:`answer_spans`, when the caller has them."""
    documents = {doc.doc_id: doc for doc in example.documents}
    candidates = {cand.cand_id: cand for cand in pool.candidates}
    gold = set(example.gold_doc_ids)
    supporting = _supporting(example)
    spans = answer_spans(text, example.answers) if spans is None else spans
    records, cursor = [], 0
    for snippet in context.snippets:
        # The rendering joins the snippets with a separator: each is found after the one before it.
        start = text.find(snippet.text, cursor)
        start = cursor if start < 0 else start
        end = start + len(snippet.text)
        cand = candidates.get(snippet.cand_id)
        kind = cand.kind if cand is not None else "document"
        sents = snippet_sentences(snippet, documents)
        doc = snippet.source_ids[0] if snippet.source_ids else ""
        record: dict[str, Any] = {
            "doc": doc,
            "title": snippet.title or (documents[doc].title if doc in documents else ""),
            "cand": snippet.cand_id,
            "sents": sents,
            "tok": int(snippet.tokens),
            "gold": any(s in gold for s in snippet.source_ids),
            "sup": None if supporting is None else any((doc, i) in supporting for i in sents),
            "ans": any(a < end and b > start for a, b in spans),
            "cut": bool(snippet.truncated),
            "kind": kind,
            "start": start,
            "end": end,
        }
        if len(snippet.source_ids) > 1:
            record["docs"] = list(snippet.source_ids)
        if kind == "summary" and cand is not None:
            record["layer"] = cand.layer
        if kind == "copy":
            record["copy_of"] = doc
        records.append(record)
        cursor = end
    return records


def pool_records(pool: Pool, kept: Sequence[str], example: Example) -> list[dict[str, Any]]:
    """The diversifier's candidates in rank order, with whether it kept each and whether it holds a gold
    answer (``ans``: a kept candidate holding it while the context does not is an answer packing dropped)."""
    gold, chosen = set(example.gold_doc_ids), set(kept)
    records = []
    for cand in pool.candidates:
        record: dict[str, Any] = {
            "id": cand.cand_id,
            "title": cand.title,
            "score": round(float(cand.score), 4),
            "gold": any(s in gold for s in cand.source_ids),
            "ans": bool(answer_in_context(cand.text, example.answers)),
            "kind": cand.kind,
            "kept": cand.cand_id in chosen,
        }
        if cand.kind == "summary":
            record["layer"] = cand.layer
        records.append(record)
    return records


_COMPACT = {"separators": (",", ":"), "ensure_ascii": False}


def pool_column(pool: Pool, selected: Pool) -> dict[str, str]:
    """The row's ``pool`` column (JSON): computed once per selection, shared by its packers and budgets."""
    kept = [c.cand_id for c in selected.candidates]
    return {POOL: json.dumps(pool_records(pool, kept, pool.example), **_COMPACT)}


def context_columns(context: Context, text: str, pool: Pool) -> dict[str, str]:
    """The row's ``snippets`` and ``answer_spans`` columns (JSON)."""
    example = pool.example
    spans = answer_spans(text, example.answers)  # once: the snippet records mark the same spans
    return {
        SNIPPETS: json.dumps(snippet_records(context, text, pool, example, spans), **_COMPACT),
        ANSWER_SPANS: json.dumps(spans, **_COMPACT),
    }
