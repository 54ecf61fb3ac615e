"""A small rule-based sentence splitter for encyclopaedic English (MuSiQue paragraphs).

Trained splitters (nltk punkt, spaCy) need model downloads, which an offline run cannot make.
Wikipedia prose is regular enough for three rules: a sentence ends at ``.``, ``!`` or ``?``
(optionally followed by closing quotes or brackets), then whitespace, then an upper-case letter, a
digit or an opening quote/bracket; except when the word before the full stop is a common
abbreviation ("Dr.", "St.", "Co.") or made of single letters and dots: initials ("J. R. R.
Tolkien", "G.K. Chesterton"), "U.S.", "e.g.", genealogical "b."/"d.". The price is a missed
boundary when a sentence ends in such a word ("... moved to the U.S. He ...").
"""

from __future__ import annotations

import re

# Candidate boundary: terminal punctuation, optional closers, whitespace.
_BOUNDARY = re.compile(r"[.!?]+[\"'\u201d\u2019)\]]*\s+")
_OPENERS = "\"'\u201c\u2018(["

# Single letters joined by dots, the final dot excluded: "J", "d", "G.K", "U.S", "e.g".
_INITIALS = re.compile(r"(?:[^\W\d_]\.)*[^\W\d_]")
# Lower-cased, without the final dot. "etc" is left out on purpose: it usually ends a sentence.
ABBREVIATIONS = frozenset(
    [
        *("mr", "mrs", "ms", "dr", "prof", "sr", "jr", "st", "mt", "ft", "rev", "hon"),
        *("gen", "col", "lt", "capt", "sgt", "cpl", "adm", "gov", "sen", "rep", "pres"),
        *("vs", "no", "nos", "vol", "vols", "pp", "ed", "eds", "fig", "figs", "approx", "ca", "est"),
        *("inc", "ltd", "co", "corp", "bros", "dept", "univ", "assn", "cf", "al", "pt", "hrs"),
        *("jan", "feb", "mar", "apr", "jun", "jul", "aug", "sep", "sept", "oct", "nov", "dec"),
    ]
)


def split_sentences(text: str) -> tuple[str, ...]:
    """``text`` split into stripped, non-empty sentences (the whole text when it has no boundary)."""
    sentences: list[str] = []
    start = 0
    for match in _BOUNDARY.finditer(text):
        end = match.end()
        if end >= len(text) or not _starts_sentence(text, end):
            continue
        if _ends_with_abbreviation(text[start : match.start() + 1]):
            continue
        sentence = text[start:end].strip()
        if sentence:
            sentences.append(sentence)
        start = end
    tail = text[start:].strip()
    if tail:
        sentences.append(tail)
    return tuple(sentences)


def _starts_sentence(text: str, pos: int) -> bool:
    while pos < len(text) and text[pos] in _OPENERS:
        pos += 1
    return pos < len(text) and (text[pos].isupper() or text[pos].isdigit())


def _ends_with_abbreviation(head: str) -> bool:
    """Whether ``head`` (text up to and including the candidate's first punctuation mark) ends
    with an abbreviation or an initial rather than a sentence."""
    if not head.endswith("."):
        return False
    before = head[-48:-1].rsplit(None, 1)  # abbreviations are short; bound the work
    if not before:
        return False
    word = before[-1].lstrip(_OPENERS)
    if word == "I":
        return False  # the pronoun or a numeral ("World War I."), hardly ever an initial
    return _INITIALS.fullmatch(word) is not None or word.lower() in ABBREVIATIONS
