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
