"""Lexical query relevance shared by the query-focused, submodular and claim-graph packers.

A text's content terms are its lowercased word tokens minus scikit-learn's English stop words, each
reduced by a light plural / possessive stemmer so that "films" matches "film" and "Obama's" matches
"Obama". The stemmer is deliberately tiny and deterministic: it only strips endings whose removal
almost never merges unrelated words (a full Porter stemmer conflates e.g. "general"/"generous").
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from functools import lru_cache

import numpy as np
from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

_WORD = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")


def light_stem(word: str) -> str:
    """Strip a possessive or plural ending; leave short words and Latin/Greek "-us"/"-is"/"-ss" alone."""
    if word.endswith("'s"):
        word = word[:-2]
    elif "'" in word:
        word = word.split("'", 1)[0]
    if len(word) <= 3 or word.isdigit():
        return word
    if word.endswith("ies") and len(word) > 4:
        return word[:-3] + "y"
    if word.endswith("sses"):
        return word[:-2]
    if word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


@lru_cache(maxsize=100_000)
def _term(token: str, stem: bool) -> str | None:
    """The content term of one word token, or None for a stop word (cached: vocabularies are small)."""
    bare = token.split("'", 1)[0]
    if bare in ENGLISH_STOP_WORDS:
        return None
    return light_stem(token) if stem else bare


@lru_cache(maxsize=200_000)
def content_terms(text: str, stem: bool = True) -> frozenset[str]:
    """Distinct content terms of ``text`` (cached: sweeps repack the same snippets at every budget)."""
    terms = {_term(token, stem) for token in set(_WORD.findall(text.lower()))}
    terms.discard(None)
    return frozenset(terms)


def lexical_relevance(query_terms: frozenset[str] | set[str], snippet_terms: frozenset[str] | set[str]) -> float:
    """Fraction of the distinct query content terms that the snippet contains (0 for an empty query)."""
    if not query_terms:
        return 0.0
    return len(query_terms & snippet_terms) / len(query_terms)


def query_term_incidence(query_terms: Iterable[str], snippet_terms: Sequence[frozenset[str]]) -> np.ndarray:
    """(n snippets, q query terms) boolean matrix: does snippet i contain query term t?

    Query terms are taken in sorted order so the columns are deterministic. The row means are the
    snippets' lexical relevance, which lets the greedy packers score coverage with array operations.
    """
    ordered = sorted(query_terms)
    column = {term: k for k, term in enumerate(ordered)}
    query = frozenset(ordered)
    incidence = np.zeros((len(snippet_terms), len(ordered)), dtype=bool)
    for row, terms in enumerate(snippet_terms):
        for term in terms & query:  # a set intersection per snippet: C speed, few hits
            incidence[row, column[term]] = True
    return incidence


def relevance_from_incidence(incidence: np.ndarray) -> np.ndarray:
    """Per-snippet lexical relevance (fraction of query terms present) from an incidence matrix."""
    if incidence.shape[1] == 0:
        return np.zeros(incidence.shape[0], dtype=np.float64)
    return incidence.mean(axis=1, dtype=np.float64)


def term_counts(text: str, stem: bool = True) -> dict[str, int]:
    """Occurrences of each content term of ``text`` (the multiset behind ``content_terms``)."""
    counts: dict[str, int] = {}
    for token in _WORD.findall(text.lower()):
        term = _term(token, stem)
        if term is not None:
            counts[term] = counts.get(term, 0) + 1
    return counts


def bm25_relevance(
    query_terms: Iterable[str], texts: Sequence[str], stem: bool = True, k1: float = 1.5, b: float = 0.75
) -> np.ndarray:
    """Okapi BM25 of each text for the distinct query terms, the texts themselves being the collection.

    The idf is log(1 + (N - df + 0.5) / (df + 0.5)) (Lucene's form), which stays positive when a term
    occurs in more than half of the texts: the classic log((N - df + 0.5) / (df + 0.5)) turns negative
    there, and the submodular objective needs non-negative relevance (its diversity term takes a square
    root). k1 and b are the usual defaults (those of ``rank_bm25``). Document length counts content terms.
    """
    ordered = sorted(query_terms)
    counts = [term_counts(t, stem) for t in texts]
    tf = np.array([[c.get(term, 0) for term in ordered] for c in counts], dtype=np.float64)
    tf = tf.reshape(len(texts), len(ordered))
    if tf.size == 0:
        return np.zeros(len(texts), dtype=np.float64)
    lengths = np.array([sum(c.values()) for c in counts], dtype=np.float64)
    average = lengths.mean() if lengths.mean() > 0 else 1.0
    df = (tf > 0).sum(axis=0)
    idf = np.log1p((len(texts) - df + 0.5) / (df + 0.5))
    saturation = tf * (k1 + 1) / (tf + k1 * (1 - b + b * lengths / average)[:, None])
    return saturation @ idf
