"""The short answer inside a verbose generation.

Instruction-tuned readers rarely reply with the bare span: they announce it ("The answer is: ...",
"Final answer: ..."), open with a lead-in line and put the answer on the next one ("... the language
models are:\\nGPT-2"), or wrap it in quotes or markdown bold. The rules follow the answer filters of
lm-evaluation-harness (the ``The answer is (.*)`` regex, first match wins, then strip) and SQuAD-style
scoring (which already ignores case, punctuation and articles, so nothing here needs to):

1. an answer prefix anywhere in the text (``Answer:``, ``The answer is``, ``The final answer is:``,
   ``The answer to the question is:`` ...) starts the answer; an empty remainder of its line means the
   answer is on the next non-empty line;
2. otherwise the first non-empty line, unless it is a lead-in ending with ``:`` followed by more text:
   then the next line, or the whole run of list items that follows (joined with ``", "``); a reply that
   is itself a list (two or more list-item lines at the top) is likewise the whole run of its items;
3. markdown emphasis and surrounding quotes are removed, and a single sentence-final period is dropped.
   A bullet (``-``, ``*``, ``+``, ``\u2022``) is removed wherever it opens the answer, a numbered marker
   (``1.``, ``2)``) only from the items of a list (rule 2): on a line of its own ``1. FC Köln`` and
   ``2. Bundesliga`` are names, not list items;
4. a reply that opens with a bare ``Yes``/``No`` followed by its justification ("No, the two mosques
   are ...") is that ``Yes``/``No``: HotpotQA and similar sets score yes/no answers all-or-nothing.

The raw generation is always kept next to the extracted answer (the ``raw_answer`` row column), so a
score can be checked against what the reader actually wrote.
"""

from __future__ import annotations

import re

_PREFIX = re.compile(
    r"(?:^|(?<=[\s*_(\[]))"
    r"(?:(?:the|my)\s+)?(?:final\s+|correct\s+|short\s+|best\s+)?answer"
    r"(?:\s+to\s+(?:the|this|your)\s+question)?"
    r"(?:\s*(?:\*\*|__))?"
    r"\s*(?:is\s*:?|:)(?:\s*(?:\*\*|__))?[ \t]*",
    re.IGNORECASE,
)
_LIST_ITEM = re.compile(r"^\s*(?:[-*+\u2022]|\d{1,3}[.)])\s+")
_BULLET = re.compile(r"^\s*[-*+\u2022]\s+")
_EMPHASIS = re.compile(r"(\*\*|__)(.+?)\1|(?<![\w*])\*(?!\s)(.+?)(?<!\s)\*(?![\w*])")
_QUOTES = {'"': '"', "'": "'", "`": "`", "\u201c": "\u201d", "\u2018": "\u2019", "\u00ab": "\u00bb"}
_YES_NO = re.compile(r"^(yes|no)(?=[,.;:!\u2014]|\s*$)", re.IGNORECASE)


def _lines(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if line.strip()]


def _strip_marks(span: str, *, list_item: bool = False) -> str:
    """``span`` without its marks; a numbered marker goes only when ``list_item`` (the span is a list's item)."""
    span = (_LIST_ITEM if list_item else _BULLET).sub("", span, count=1).strip()
    previous = None
    while span != previous:  # the marks nest in any order: "**Paris**.", '"Paris".', "*'Paris'*"
        previous = span
        span = _EMPHASIS.sub(lambda m: m.group(2) or m.group(3), span).strip()
        # Unbalanced emphasis left over from a cut-off generation ("**Paris").
        span = span.strip("*_").strip()
        closing = _QUOTES.get(span[:1])
        if closing and len(span) >= 2 and span.endswith(closing) and closing not in span[1:-1]:
            span = span[1:-1].strip()
        if span.endswith(".") and "." not in span[:-1]:
            span = span[:-1].rstrip()
    return span


def _list_items(lines: list[str]) -> list[str]:
    """The run of list-item lines that opens ``lines``, each without its marker and marks."""
    items = []
    for line in lines:
        if not _LIST_ITEM.match(line):
            break
        items.append(_strip_marks(line, list_item=True))
    return items


def _after_lead_in(lines: list[str]) -> str:
    """The first line; what follows it when it only announces the answer; the items when it opens a list."""
    first, rest = lines[0], lines[1:]
    if first.rstrip("*_ ").endswith(":") and rest:
        if not _LIST_ITEM.match(rest[0]):
            return _strip_marks(rest[0])
        return ", ".join(item for item in _list_items(rest) if item)
    if len(items := _list_items(lines)) >= 2:
        return ", ".join(item for item in items if item)
    return _strip_marks(first)


def extract_answer(text: str) -> str:
    """The short answer in ``text`` (a reader's whole generation); ``""`` when it has none."""
    text = text.strip()
    match = _PREFIX.search(text)
    if match:
        remainder = text[match.end() :]
        line_end = remainder.find("\n")
        same_line = (remainder if line_end < 0 else remainder[:line_end]).strip()
        # the rest of the prefix's line, or (when that holds no answer) the lines after it
        span = same_line if _strip_marks(same_line) else remainder.strip()
        if span:
            text = span
    lines = _lines(text)
    if not lines:
        return ""
    span = _after_lead_in(lines)
    yes_no = _YES_NO.match(span)
    if yes_no:
        return yes_no.group(1)
    return span
