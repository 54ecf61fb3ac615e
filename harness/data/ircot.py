"""Records in the processed format of IRCoT (Trivedi et al., 2023) as Examples.

The format is the one IRCoT's processing scripts write for HotpotQA, 2WikiMultiHopQA and MuSiQue, and
that Adaptive-RAG reuses: one JSON object per line, ``question_id, question_text, answers_objects
[{number, date {day, month, year}, spans}], contexts [{id or idx, title, paragraph_text,
is_supporting}]``, sometimes with more keys (``dataset``, ``level``, ``type``, ``reasoning_steps``).
``source`` names the benchmark the file was made from (:data:`SOURCES`); it labels the Examples
(``{source}_ircot`` unless a name is given) and, where a record states its own ``dataset``, must agree
with it.

Documents are the ``contexts`` in file order, ids by position (:mod:`harness.data.records`; the
released subsamples number their contexts ``"0"``, ``"1"``, ... in that order, so the position is the
context id), sentences split with :func:`harness.text.sentences.split_sentences` as for MuSiQue. Gold
documents are the contexts flagged ``is_supporting``; ``hops`` is their count; at least one is required.
``qtype`` is the record's ``type`` where it has one (HotpotQA: bridge/comparison), else for MuSiQue the
id's prefix before ``__`` (``2hop``, ``3hop1``, ...).

Support is marked per paragraph only. The sentences that support the answer are unknown, so
``metadata["supporting_sentences"]`` is None (HotpotQA and 2WikiMultiHopQA give a tuple there) and
``metadata["support_level"]`` is ``"paragraph"``: nothing sentence-level is guessed from the paragraph
flags. The oracle packer and the context metrics work on gold documents, which this format gives.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from harness.core.types import Document, Example
from harness.data.errors import DatasetMismatchError
from harness.data.formats import DatasetFormat, register_format
from harness.data.record_lists import each_object
from harness.data.records import RecordContext, doc_id_for, question_id
from harness.text.sentences import split_sentences

ID_FIELD = "question_id"
SOURCES = ("hotpotqa", "2wikimultihopqa", "musique")
KEYS = frozenset({"question_id", "question_text", "answers_objects", "contexts"})  # what identifies the layout
SUPPORT_LEVEL = "paragraph"
_DATE_PARTS = ("day", "month", "year")
# The dataset configs (conf/dataset/) of the ircot layout, which takes ``source``.
CONFIGS = "dataset=hotpotqa_ircot, 2wikimultihopqa_ircot or musique_ircot"
# How each source's question ids look in IRCoT's files (the ids of the original releases): a file loaded
# as another source would be scored under the wrong benchmark's rule without a word.
SOURCE_IDS = {
    "hotpotqa": (re.compile(r"[0-9a-f]{24}"), "24 hex digits"),
    "2wikimultihopqa": (re.compile(r"[0-9a-f]{32}"), "32 hex digits"),
    "musique": (re.compile(r"[2-4]hop\d*__\S+"), "NhopM__..."),
}


def dataset_name(source: str | None) -> str:
    """The default ``Example.dataset`` of a file from ``source``: ``hotpotqa_ircot`` and so on."""
    return f"{source}_ircot" if source else "ircot"


def check_source(source: str | None) -> None:
    if source is not None and source not in SOURCES:
        raise ValueError(f"unknown IRCoT source {source!r}; expected one of {SOURCES}")


def source_of_id(question_id: str) -> str | None:
    """The source whose question ids look like ``question_id`` (:data:`SOURCE_IDS`), or None."""
    return next((source for source, (shape, _) in SOURCE_IDS.items() if shape.fullmatch(question_id)), None)


def source_of_record(record: dict[str, Any]) -> dict[str, Any]:
    """The ``source`` option a record shows: its own ``dataset``, else the shape of its question id."""
    stated = record.get("dataset")
    if isinstance(stated, str) and stated.strip() in SOURCES:
        return {"source": stated.strip()}
    qid = record.get(ID_FIELD)
    found = source_of_id(qid.strip()) if isinstance(qid, str) else None
    return {"source": found} if found else {}


def _check_source_matches(record: dict[str, Any], qid: str, source: str, ctx: RecordContext) -> None:
    stated = record.get("dataset")
    if isinstance(stated, str) and stated.strip():
        found, field, why = stated.strip(), "dataset", f"record is from {stated.strip()!r}"
    else:
        found, field = source_of_id(qid), ID_FIELD
        why = f"the id looks like {found}'s ({SOURCE_IDS[found][1]})" if found else ""
    if found is None or found == source:
        return
    fits = {"source": found} if found in SOURCES else {}
    raise DatasetMismatchError(
        ctx.path,
        f"{why}, but the file is loaded as source {source!r}" + (f" (use source={found!r})" if fits else ""),
        "ircot",
        fits,
        ctx.index,
        ctx.record_id,
        field,
    )


def parse_record(
    record: dict[str, Any], ctx: RecordContext, *, dataset: str, split: str, source: str | None = None
) -> Example:
    check_source(source)
    qid = question_id(record, ID_FIELD, ctx)
    question = ctx.text(record, "question_text")
    if source is not None:
        _check_source_matches(record, qid, source, ctx)
    found = answers_from_objects(ctx.get(record, "answers_objects", list), ctx)
    raw_contexts = ctx.items(record, "contexts", "empty context")

    documents: list[Document] = []
    gold: list[str] = []
    for position, context in enumerate(raw_contexts):
        document, supporting = _context(qid, position, context, ctx)
        documents.append(document)
        if supporting:
            gold.append(document.doc_id)
    if not gold:
        raise ctx.error("no supporting paragraph (no context has is_supporting true)", "contexts")

    qtype = record.get("type")
    if not isinstance(qtype, str):
        qtype = qid.split("__", 1)[0] if source == "musique" and "__" in qid else ""
    metadata: dict[str, Any] = {
        "source": source,
        "support_level": SUPPORT_LEVEL,
        "supporting_sentences": None,  # unknown: the format marks support per paragraph
    }
    if isinstance(record.get("level"), str):
        metadata["level"] = record["level"]
    return Example(
        question_id=qid,
        question=question,
        answers=found,
        gold_doc_ids=tuple(gold),
        documents=tuple(documents),
        hops=len(gold),
        qtype=qtype.strip(),
        split=split,
        dataset=dataset,
        metadata=metadata,
    )


def answers_from_objects(objects: list[Any], ctx: RecordContext) -> tuple[str, ...]:
    """Every answer string of ``answers_objects``, in order, stripped and without repeats.

    Each object is a DROP answer. DROP's evaluation (``answer_json_to_strings``, also in IRCoT's and
    Adaptive-RAG's ``drop_eval.py``) reads the first non-empty of ``number``, ``spans`` and ``date``; a
    well-formed object sets only one, and taking every non-empty part in that order gives the same
    strings. A number becomes its string; several spans, and several objects, are taken as
    alternatives (the first is the reference answer). A date is its non-empty parts joined by spaces
    in the order day, month, year, as given: ``12 May 1990``, ``May 1990``, ``1990``. That is DROP's
    ``"{day} {month} {year}"`` without the blanks of missing parts; IRCoT's reader joins the parts with
    ``-`` instead, which its DROP scorer tokenises the same way. Objects with nothing in them are
    passed over; a record with no answer at all is an error.
    """
    if not objects:
        raise ctx.error("no answer objects", "answers_objects")
    out: list[str] = []
    for field, entry in each_object(objects, ctx, "answers_objects"):
        for answer in (_number(entry, ctx, field), *_spans(entry, ctx, field), _date(entry, ctx, field)):
            if answer and answer not in out:
                out.append(answer)
    if not out:
        raise ctx.error("no usable answer: every number, span and date is empty", "answers_objects")
    return tuple(out)


def _number(entry: dict[str, Any], ctx: RecordContext, field: str) -> str:
    value = entry.get("number")
    if value is None:
        return ""
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise ctx.error(f"'number' is {type(value).__name__}, not a string or number", field)
    return str(value).strip()


def _spans(entry: dict[str, Any], ctx: RecordContext, field: str) -> list[str]:
    spans = entry.get("spans")
    if spans is None:
        return []
    if not isinstance(spans, list):
        raise ctx.error(f"'spans' is {type(spans).__name__}, not a list", field)
    out = []
    for index, span in enumerate(spans):
        if not isinstance(span, str):
            raise ctx.error(f"span {index} is {type(span).__name__}, not a string", field)
        out.append(span.strip())
    return out


def _date(entry: dict[str, Any], ctx: RecordContext, field: str) -> str:
    date = entry.get("date")
    if date is None:
        return ""
    if not isinstance(date, dict):
        raise ctx.error(f"'date' is {type(date).__name__}, not an object", field)
    parts = []
    for key in _DATE_PARTS:
        value = date.get(key)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, (str, int)):
            raise ctx.error(f"date {key!r} is {type(value).__name__}, not a string or integer", field)
        parts.append(str(value).strip())
    return " ".join(part for part in parts if part)


def _context(qid: str, position: int, context: Any, ctx: RecordContext) -> tuple[Document, bool]:
    field = f"contexts[{position}]"
    if not isinstance(context, dict):
        raise ctx.error(f"expected an object, got {type(context).__name__}", field)
    for key, kind in (("title", str), ("paragraph_text", str), ("is_supporting", bool)):
        value = context.get(key)
        if not isinstance(value, kind):
            problem = "missing" if key not in context else "null" if value is None else f"not {kind.__name__}"
            raise ctx.error(f"{key!r} is {problem}", field)
    sentences = split_sentences(context["paragraph_text"])
    if not sentences:
        raise ctx.error(f"paragraph {context['title']!r} has no text", field)
    document = Document(doc_id=doc_id_for(qid, position), title=context["title"].strip(), sentences=sentences)
    return document, context["is_supporting"]


def _dataset_name(path: Path, options: Mapping[str, Any]) -> str:
    return dataset_name(options.get("source"))


def _check_options(options: Mapping[str, Any]) -> None:
    check_source(options.get("source"))


FORMAT = register_format(
    DatasetFormat(
        layout="ircot",
        looks="IRCoT's processed format: question_id, question_text, answers_objects, contexts",
        default_name=_dataset_name,
        parse=parse_record,
        id_field=ID_FIELD,
        options=("source",),
        check_options=_check_options,
        configs=CONFIGS,
        detect_record=KEYS.issubset,
        detect_options=source_of_record,
    )
)
