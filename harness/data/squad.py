"""SQuAD-style files (COVID-QA) as Examples: one per question, over its article cut into passages.

Layout: ``{"data": [{"paragraphs": [{"context", "document_id"?, "qas": [{"id", "question",
"answers": [{"text", "answer_start"}], "is_impossible"?}]}]}]}``. COVID-QA stores each whole
article (thousands of words) as one ``context``, too long to rank or read as one unit, so every
context is split into sentences (:func:`harness.text.sentences.split_sentences`, line by line, so a
title or author line never runs into the abstract) and the sentences are packed greedily, in
order, into passages of at most ``passage_words`` words (a single longer sentence is a passage of
its own). All questions on a context share its passages, whose ids are
``f"{document_id}::{position}"`` (the context's position in the file when it has no
``document_id``); the title of each passage is the context's first line (the article title).

Gold documents are the passages that overlap an answer span. About a sixth of COVID-QA's
``answer_start`` offsets are off by a few characters (the answer text often keeps a leading space
the offset skips); the span used is the occurrence of the stripped answer text nearest to
``answer_start``, falling back to ``answer_start`` itself when the text is not in the context.
Unanswerable SQuAD v2 questions (``is_impossible``) are kept with no answers and no gold passages.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.core.types import Document, Example
from harness.data.errors import DatasetFormatError
from harness.data.formats import DatasetFormat, register_format
from harness.data.io import decode_list, read_text, text_position
from harness.data.record_lists import each_object
from harness.data.records import RecordContext, answers, doc_id_for, peek_id, question_id
from harness.data.validate import RecordChecks
from harness.text.sentences import split_sentences

ID_FIELD = "id"
DEFAULT_PASSAGE_WORDS = 100


@dataclass(frozen=True)
class Passage:
    start: int  # character span of the passage in its context
    end: int
    sentences: tuple[str, ...]


def split_passages(text: str, max_words: int = DEFAULT_PASSAGE_WORDS) -> list[Passage]:
    """``text`` as consecutive passages of whole sentences, at most ``max_words`` words each."""
    if isinstance(max_words, bool) or not isinstance(max_words, int) or max_words < 1:
        raise ValueError(f"passage_words must be a positive integer, got {max_words!r}")
    spans = _sentence_spans(text)
    passages: list[Passage] = []
    current: list[tuple[int, int, str]] = []
    words = 0
    for start, end, sentence in spans:
        n = len(sentence.split())
        if current and words + n > max_words:
            passages.append(_passage(current))
            current, words = [], 0
        current.append((start, end, sentence))
        words += n
    if current:
        passages.append(_passage(current))
    return passages


def _passage(spans: list[tuple[int, int, str]]) -> Passage:
    return Passage(spans[0][0], spans[-1][1], tuple(s for _, _, s in spans))


def _sentence_spans(text: str) -> list[tuple[int, int, str]]:
    """(start, end, sentence) for every sentence, line by line; whitespace inside is collapsed."""
    spans = []
    line_start = 0
    for line in text.split("\n"):
        pos = line_start
        for sentence in split_sentences(line):
            # The splitter returns stripped substrings in order, so each is found after the last.
            start = text.index(sentence, pos)
            pos = start + len(sentence)
            spans.append((start, pos, " ".join(sentence.split())))
        line_start += len(line) + 1
    return spans


def answer_span(context: str, text: str, start: int) -> tuple[int, int]:
    """The span of ``text`` (stripped) nearest to the released ``start`` offset."""
    needle = text.strip()
    best = None
    found = context.find(needle)
    while found >= 0 and needle:
        if best is None or abs(found - start) < abs(best - start):
            best = found
        found = context.find(needle, found + 1)
    if best is None:
        return start, start + max(len(needle), 1)
    return best, best + len(needle)


# Where the article list opens in a SQuAD file: {"data": [ or {"version": "...", "data": [.
_DATA_LIST = re.compile(r'\s*\{\s*(?:"version"\s*:\s*"[^"\\]*"\s*,\s*)?"data"\s*:\s*\[')


def _article_at(path: Path, text: str) -> int | None:
    """Index of the article that ``text`` (a file's beginning) breaks off in, when the list is found."""
    match = _DATA_LIST.match(text)
    if match is None:
        return None
    try:
        decode_list(path, text, match.end() - 1)
    except DatasetFormatError as exc:
        return exc.index
    return None


def read_articles(path: Path) -> list[dict[str, Any]]:
    """The ``data`` list of a SQuAD-style file, each entry checked to be an object."""
    text = read_text(path, locate=lambda prefix: _article_at(path, prefix))
    if not text.strip():
        raise DatasetFormatError(path, "file is empty")
    try:
        top = json.loads(text)
    except json.JSONDecodeError as exc:
        # Decoding the article list one article at a time names the article a truncation hit.
        match = _DATA_LIST.match(text)
        if match is not None:
            decode_list(path, text, match.end() - 1)
        raise DatasetFormatError(
            path, f"invalid or truncated JSON at {text_position(text, exc.pos)}: {exc.msg}"
        ) from None
    if not isinstance(top, dict) or not isinstance(top.get("data"), list):
        raise DatasetFormatError(path, "expected a JSON object with a 'data' list", field="data")
    for index, article in enumerate(top["data"]):
        if not isinstance(article, dict):
            raise DatasetFormatError(path, f"expected an object, got {type(article).__name__}", index, field="data")
    return top["data"]


def load_file(
    path: str | Path,
    *,
    dataset: str,
    split: str,
    passage_words: int = DEFAULT_PASSAGE_WORDS,
) -> list[Example]:
    """Every question of a SQuAD-style file as an Example, in file order.

    Errors name the article index (``record``) and the field path inside it.
    """
    path = Path(path)
    examples: list[Example] = []
    checks = RecordChecks(path, unit="questions")
    position = 0
    for a_index, article in enumerate(read_articles(path)):
        ctx = RecordContext(path, a_index, None)
        paragraphs = ctx.get(article, "paragraphs", list)
        for field, paragraph in each_object(paragraphs, ctx, "paragraphs"):
            context = paragraph.get("context")
            if context is not None and not isinstance(context, str):
                raise ctx.error(f"expected a string, got {_kind_of(context)}", f"{field}.context")
            if context is None or not context.strip():
                raise ctx.error("missing or empty 'context'", f"{field}.context")
            doc_key = peek_id(paragraph, "document_id") or str(position)
            position += 1
            passages = split_passages(context, passage_words)
            title = context.strip().split("\n", 1)[0].strip()
            documents = tuple(
                Document(doc_id=doc_id_for(doc_key, i), title=title, sentences=p.sentences)
                for i, p in enumerate(passages)
            )
            qas = paragraph.get("qas")
            if not isinstance(qas, list):
                raise ctx.error("missing 'qas' list", f"{field}.qas")
            for qfield, qa in each_object(qas, ctx, f"{field}.qas"):
                qctx = RecordContext(path, a_index, peek_id(qa, ID_FIELD))
                example = _question(qa, qctx, qfield, context, passages, documents, doc_key, dataset, split)
                checks.unique(example.question_id, qctx, f"{qfield}.{ID_FIELD}", where=f"record {a_index}, {qfield}")
                examples.append(example)
    checks.finish(len(examples), len(examples))
    return examples


def _kind_of(value: Any) -> str:
    """A JSON value's type in words, as messages give it ("a list", "an object")."""
    names = {list: "a list", dict: "an object", bool: "true/false", int: "a number", float: "a number"}
    return names.get(type(value), type(value).__name__)


def _question(
    qa: dict[str, Any],
    ctx: RecordContext,
    field: str,
    context: str,
    passages: list[Passage],
    documents: tuple[Document, ...],
    doc_key: str,
    dataset: str,
    split: str,
) -> Example:
    try:
        qid = question_id(qa, ID_FIELD, ctx)
        question = ctx.text(qa, "question")
        raw_answers = ctx.get(qa, "answers", list)
    except DatasetFormatError as exc:
        raise ctx.error(exc.message, f"{field}.{exc.field}") from exc
    impossible = bool(qa.get("is_impossible", False))
    texts: list[str] = []
    gold_positions: set[int] = set()
    for afield, answer in each_object(raw_answers, ctx, f"{field}.answers"):
        text, start = answer.get("text"), answer.get("answer_start")
        if not isinstance(text, str) or not text.strip():
            raise ctx.error("missing or empty 'text'", afield)
        if not isinstance(start, int) or isinstance(start, bool) or not 0 <= start < len(context):
            raise ctx.error(f"answer_start {start!r} is not an offset into the context", afield)
        texts.append(text.strip())
        lo, hi = answer_span(context, text, start)
        gold_positions.update(i for i, p in enumerate(passages) if p.start < hi and lo < p.end)
    if not texts and not impossible:
        raise ctx.error("no answers for a question not marked is_impossible", f"{field}.answers")
    if texts and not gold_positions:
        # An answer text absent from the context, its answer_start between passages: nothing is gold.
        raise ctx.error("no passage holds an answer span (answer text not in the context)", f"{field}.answers")
    answer_tuple = answers(texts[0], texts[1:], ctx, f"{field}.answers") if texts else ()
    return Example(
        question_id=qid,
        question=question,
        answers=answer_tuple,
        gold_doc_ids=tuple(documents[i].doc_id for i in sorted(gold_positions)),
        documents=documents,
        hops=1,
        split=split,
        dataset=dataset,
        metadata={"document_id": doc_key, "answerable": not impossible},
    )


def looks_like_squad(path: Path) -> bool:
    """A file opening as SQuAD files do: one object whose first key is "data" or "version" (JSON lines
    start with a record)."""
    if not path.is_file():
        return False
    with path.open("rb") as handle:
        # Only sniffing: a bad byte here is reported, with its offset, by the loader that reads the file.
        head = handle.read(4096).decode("utf-8-sig", errors="replace").lstrip()
    return re.match(r'\{\s*"(data|version)"\s*:', head) is not None


FORMAT = register_format(
    DatasetFormat(
        layout="squad",
        looks='SQuAD-style: one {"data": [...]} object',
        default_name="covidqa",
        load=load_file,  # one file of articles, not a list of per-question records
        detect_path=looks_like_squad,
    )
)
