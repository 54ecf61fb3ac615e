"""Diagnostics of the packed context a reader sees, measured against the question's gold record.

They separate "the evidence never reached the reader" from "the reader missed evidence it had":
answer presence is measured on the rendered context text, gold coverage and density on the
snippets' ``source_ids`` (so copies and summary nodes credit the documents they came from).
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np

from harness.core.types import Context, Example
from harness.metrics.answers import answer_tokens, as_answer_list
from harness.metrics.registry import (
    ALL_GOLD_IN_READER,
    ANSWER_IN_CONTEXT,
    ANSWER_IN_CONTEXT_GRADED,
    GOLD_DOC_COVERAGE,
    GOLD_TOKEN_DENSITY,
)


def _token_run_present(context_tokens: list[str], needle: list[str]) -> bool:
    # Tokens contain no spaces, so a space-delimited substring test is exactly a contiguous
    # token-run test ("he" cannot match inside "the") and runs in C.
    if not needle:
        return False
    haystack = " " + " ".join(context_tokens) + " "
    return (" " + " ".join(needle) + " ") in haystack


def answer_in_context(context_text: str, answers: str | Iterable[str]) -> float:
    """1.0 if some normalised gold answer or alias is a contiguous run of the normalised context tokens."""
    return _answer_in_tokens(answer_tokens(context_text), answers)


def _answer_in_tokens(context_tokens: list[str], answers: str | Iterable[str]) -> float:
    for answer in as_answer_list(answers):
        if _token_run_present(context_tokens, answer_tokens(answer)):
            return 1.0
    return 0.0


def _graded_single(context_tokens: np.ndarray, needle: list[str]) -> float:
    """Best fraction of the answer's tokens (as a multiset) inside any window of 2 x answer length."""
    if not needle or context_tokens.size == 0:
        return 0.0
    vocab, needle_counts = np.unique(np.asarray(needle, dtype=object), return_counts=True)
    # Column j of `hits` marks context positions holding the answer's j-th distinct token; prefix sums
    # give every window's per-token counts at once: O(len(context) * distinct answer tokens).
    slot = {tok: j for j, tok in enumerate(vocab)}
    codes = np.fromiter((slot.get(tok, -1) for tok in context_tokens), dtype=np.int64, count=context_tokens.size)
    hits = np.zeros((codes.size + 1, vocab.size), dtype=np.int64)
    matched = codes >= 0
    hits[1:][np.flatnonzero(matched), codes[matched]] = 1
    prefix = np.cumsum(hits, axis=0)
    width = min(2 * len(needle), codes.size)  # a context shorter than the window is one window
    window_counts = prefix[width:] - prefix[:-width]
    # Multiset intersection: a context token covers at most as many answer tokens as it repeats.
    found = np.minimum(window_counts, needle_counts[None, :]).sum(axis=1)
    return float(found.max()) / len(needle)


def answer_in_context_graded(context_text: str, answers: str | Iterable[str]) -> float:
    """Fraction of gold-answer tokens found together in some window of width 2 x answer length.

    Maximised over the answer, its aliases and window positions; a contiguous match scores 1.0, so
    this is 1.0 whenever :func:`answer_in_context` is.
    """
    return _graded_in_tokens(answer_tokens(context_text), answers)


def _graded_in_tokens(context_tokens: list[str], answers: str | Iterable[str]) -> float:
    array = np.asarray(context_tokens, dtype=object)
    return max((_graded_single(array, answer_tokens(a)) for a in as_answer_list(answers)), default=0.0)


def _snippet_is_gold(source_ids: tuple[str, ...], gold: set[str]) -> bool:
    return any(s in gold for s in source_ids)


def contributing_source_ids(context: Context) -> set[str]:
    """Documents that contribute a snippet: a source of at least one whole (untruncated) snippet."""
    return {s for snip in context.snippets if not snip.truncated for s in snip.source_ids}


def gold_doc_coverage(context: Context, gold_doc_ids: Iterable[str]) -> float:
    """Fraction of distinct gold documents contributing at least one snippet; NaN with no gold docs.

    A document contributes a snippet when a whole unit of it (a sentence, a window, a node: whatever
    ``snippets.unit`` makes) is in the context. A fragment that a packer cut to fit the budget
    (``Snippet.truncated``; ``packer=packed`` with ``misfit=truncate_last``) is shown to the reader and
    counts for answer-in-context, which is measured on the rendered text, but never credits its document
    here, however long: fragments ran as short as "The" or "He was", and crediting them inflated the
    naive baseline's coverage. ``Context.extra["fragment_tokens"]`` keeps the fragment's length.
    """
    gold = set(gold_doc_ids)
    if not gold:
        return math.nan
    return len(gold & contributing_source_ids(context)) / len(gold)


def all_gold_in_reader(context: Context, gold_doc_ids: Iterable[str]) -> float:
    """1.0 if every gold document contributes a snippet (see :func:`gold_doc_coverage`), else 0.0; NaN with
    no gold docs."""
    coverage = gold_doc_coverage(context, gold_doc_ids)
    return coverage if math.isnan(coverage) else float(coverage == 1.0)


def gold_token_density(context: Context, gold_doc_ids: Iterable[str]) -> float:
    """Share of the context's snippet tokens that come from a gold document (fragments included: their
    tokens do reach the reader).

    0.0 for an empty context; NaN when the question has no gold documents (undefined, and a 0 would
    drag averages over questions that simply lack gold annotation).
    """
    gold = set(gold_doc_ids)
    if not gold:
        return math.nan
    total = sum(snip.tokens for snip in context.snippets)
    if total <= 0:
        return 0.0
    gold_tokens = sum(snip.tokens for snip in context.snippets if _snippet_is_gold(snip.source_ids, gold))
    return gold_tokens / total


def context_diagnostics(context: Context, example: Example, context_text: str) -> dict[str, float]:
    """All packed-context diagnostics for one question, keyed by their result-column names."""
    context_tokens = answer_tokens(context_text)  # normalised once for both answer figures
    return {
        ANSWER_IN_CONTEXT: _answer_in_tokens(context_tokens, example.answers),
        ANSWER_IN_CONTEXT_GRADED: _graded_in_tokens(context_tokens, example.answers),
        GOLD_DOC_COVERAGE: gold_doc_coverage(context, example.gold_doc_ids),
        ALL_GOLD_IN_READER: all_gold_in_reader(context, example.gold_doc_ids),
        GOLD_TOKEN_DENSITY: gold_token_density(context, example.gold_doc_ids),
    }
