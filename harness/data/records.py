"""Field checks and shared building blocks for the per-format loaders.

Document ids are ``f"{question_id}::{paragraph_index}"``, where the paragraph index is the
paragraph's position in the record's ``context`` list (HotpotQA, 2WikiMultiHopQA) or its ``idx``
field (MuSiQue). Position-based ids stay unique when a context repeats a title (2WikiMultiHopQA
does) and are stable: the same file always yields the same ids.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.core.types import Document
from harness.data.errors import DatasetFormatError

_MISSING = object()


def doc_id_for(question_id: str, paragraph_index: int) -> str:
    return f"{question_id}::{paragraph_index}"


@dataclass(frozen=True)
class RecordContext:
    """Where a record sits (file, position, id), so every check can say so when it fails."""

    path: Path
    index: int
    record_id: str | None = None

    def error(self, message: str, field: str | None = None) -> DatasetFormatError:
        return DatasetFormatError(self.path, message, self.index, self.record_id, field)

    def get(self, record: dict[str, Any], field: str, kind: type | tuple[type, ...]) -> Any:
        """``record[field]``, which must be present, not null and of ``kind``."""
        value = record.get(field, _MISSING)
        if value is _MISSING:
            raise self.error("missing field", field)
        if value is None:
            raise self.error("field is null", field)
        # bool is an int subclass; an id or a count given as true/false is a format error.
        if not isinstance(value, kind) or (isinstance(value, bool) and bool not in _as_tuple(kind)):
            raise self.error(f"expected {_kind_name(kind)}, got {type(value).__name__}", field)
        return value

    def items(self, record: dict[str, Any], field: str, empty: str) -> list[Any]:
        """A list field that holds something; ``empty`` says what an empty one lacks."""
        value = self.get(record, field, list)
        if not value:
            raise self.error(empty, field)
        return value

    def text(self, record: dict[str, Any], field: str) -> str:
        """A non-blank string field, stripped."""
        value = self.get(record, field, str).strip()
        if not value:
            raise self.error("empty string", field)
        return value


def _as_tuple(kind: type | tuple[type, ...]) -> tuple[type, ...]:
    return kind if isinstance(kind, tuple) else (kind,)


def _kind_name(kind: type | tuple[type, ...]) -> str:
    names = {str: "a string", list: "a list", int: "an integer", bool: "true/false", dict: "an object"}
    return " or ".join(names.get(k, k.__name__) for k in _as_tuple(kind))


def peek_id(record: dict[str, Any], field: str) -> str | None:
    """The record's id for error messages, before the record has been checked."""
    value = record.get(field)
    return str(value) if isinstance(value, (str, int)) and not isinstance(value, bool) else None


def question_id(record: dict[str, Any], field: str, ctx: RecordContext) -> str:
    value = ctx.get(record, field, (str, int))
    value = str(value).strip()
    if not value:
        raise ctx.error("empty question id", field)
    return value


def answers(answer: str, aliases: Iterable[Any], ctx: RecordContext, alias_field: str) -> tuple[str, ...]:
    """``(answer, *aliases)`` stripped, blank aliases dropped, repeats removed in first-seen order."""
    out = [answer]
    for position, alias in enumerate(aliases):
        if not isinstance(alias, str):
            raise ctx.error(f"alias {position} is {type(alias).__name__}, not a string", alias_field)
        alias = alias.strip()
        if alias and alias not in out:
            out.append(alias)
    return tuple(out)


def context_paragraphs(
    record: dict[str, Any], ctx: RecordContext, allow_empty: bool = False
) -> list[tuple[str, tuple[str, ...]]]:
    """The ``context`` field in HotpotQA form, ``[[title, [sentence, ...]], ...]``, as (title, sentences).

    Sentences are stripped (HotpotQA keeps each sentence's leading space) but none is dropped, so
    the sentence indices of ``supporting_facts`` keep pointing at the right sentence.
    """
    context = ctx.get(record, "context", list)
    if not context and not allow_empty:
        raise ctx.error("empty context", "context")
    paragraphs = []
    for position, entry in enumerate(context):
        field = f"context[{position}]"
        if not (isinstance(entry, (list, tuple)) and len(entry) == 2):
            raise ctx.error("expected a [title, [sentences]] pair", field)
        title, sentences = entry
        if not isinstance(title, str):
            raise ctx.error(f"title is {type(title).__name__}, not a string", field)
        if not isinstance(sentences, list) or not all(isinstance(s, str) for s in sentences):
            raise ctx.error("sentences must be a list of strings", field)
        if not any(s.strip() for s in sentences):
            raise ctx.error(f"paragraph {title!r} has no text", field)
        paragraphs.append((title.strip(), tuple(s.strip() for s in sentences)))
    return paragraphs


def supporting_facts(record: dict[str, Any], ctx: RecordContext) -> list[tuple[str, int]]:
    """``supporting_facts`` as (title, sentence index) pairs; at least one is required."""
    facts = ctx.items(record, "supporting_facts", "no supporting facts")
    out = []
    for position, fact in enumerate(facts):
        if not (
            isinstance(fact, (list, tuple))
            and len(fact) == 2
            and isinstance(fact[0], str)
            and isinstance(fact[1], int)
            and not isinstance(fact[1], bool)
        ):
            raise ctx.error(f"entry {position} is not a [title, sentence_index] pair", "supporting_facts")
        out.append((fact[0].strip(), fact[1]))
    return out


@dataclass(frozen=True)
class GoldMatch:
    gold_doc_ids: tuple[str, ...]  # in document order
    gold_titles: tuple[str, ...]  # distinct supporting titles, first-mention order
    missing_titles: tuple[str, ...]  # supporting titles with no paragraph in the context
    supporting_sentences: tuple[tuple[str, int], ...]  # (doc_id, sentence index)


def match_supporting_facts(
    question_id: str,
    paragraphs: Sequence[tuple[str, tuple[str, ...]]],
    facts: Sequence[tuple[str, int]],
) -> GoldMatch:
    """Marks the paragraphs that supporting facts name as gold.

    When a title occurs more than once in the context, the first occurrence long enough to hold
    every cited sentence index is the gold one (falling back to the first occurrence). Sentence
    indices beyond a paragraph's end (a known defect of a few upstream records) are left out of
    ``supporting_sentences``; the paragraph stays gold.
    """
    cited: dict[str, list[int]] = {}
    for title, sentence in facts:
        cited.setdefault(title, []).append(sentence)
    positions: dict[str, list[int]] = {}
    for position, (title, _) in enumerate(paragraphs):
        positions.setdefault(title, []).append(position)

    gold_positions: dict[int, str] = {}
    missing = []
    for title, sentence_ids in cited.items():
        if title not in positions:
            missing.append(title)
            continue
        candidates = positions[title]
        needed = max(sentence_ids)
        chosen = next((p for p in candidates if len(paragraphs[p][1]) > needed), candidates[0])
        gold_positions[chosen] = title

    order = sorted(gold_positions)
    supporting = tuple(
        (doc_id_for(question_id, position), sentence)
        for position in order
        for sentence in sorted(set(cited[gold_positions[position]]))
        if 0 <= sentence < len(paragraphs[position][1])
    )
    return GoldMatch(
        gold_doc_ids=tuple(doc_id_for(question_id, p) for p in order),
        gold_titles=tuple(cited),
        missing_titles=tuple(missing),
        supporting_sentences=supporting,
    )


def documents_from_paragraphs(
    question_id: str, paragraphs: Sequence[tuple[str, tuple[str, ...]]]
) -> tuple[Document, ...]:
    return tuple(
        Document(doc_id=doc_id_for(question_id, position), title=title, sentences=sentences)
        for position, (title, sentences) in enumerate(paragraphs)
    )
