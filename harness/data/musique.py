"""MuSiQue records as Examples.

Fields: ``id, paragraphs [{idx, title, paragraph_text, is_supporting}], question,
question_decomposition, answer, answer_aliases, answerable``. Gold documents are the paragraphs
flagged ``is_supporting``; ``hops`` is the length of ``question_decomposition``; ``qtype`` is the id's
prefix before ``__`` (``2hop``, ``3hop1``, ``4hop3``, ...). Paragraph text is split into sentences
with :func:`harness.text.sentences.split_sentences`. Document ids use the paragraph's ``idx``.
Unanswerable records (MuSiQue-Full) are kept, with ``metadata["answerable"]`` false.
"""

from __future__ import annotations

from typing import Any

from harness.core.types import Document, Example
from harness.data.formats import DatasetFormat, has_keys, register_format
from harness.data.records import RecordContext, answers, doc_id_for, question_id
from harness.text.sentences import split_sentences

ID_FIELD = "id"


def parse_record(record: dict[str, Any], ctx: RecordContext, *, dataset: str, split: str) -> Example:
    qid = question_id(record, ID_FIELD, ctx)
    question = ctx.text(record, "question")
    answer = ctx.text(record, "answer")
    aliases = record.get("answer_aliases") or []
    if not isinstance(aliases, list):
        raise ctx.error(f"expected a list, got {type(aliases).__name__}", "answer_aliases")
    decomposition = ctx.items(record, "question_decomposition", "empty decomposition")
    raw_paragraphs = ctx.items(record, "paragraphs", "empty context")

    documents: list[Document] = []
    gold: list[str] = []
    seen: set[str] = set()
    for position, paragraph in enumerate(raw_paragraphs):
        document, supporting = _paragraph(qid, position, paragraph, ctx)
        if document.doc_id in seen:
            raise ctx.error(f"paragraph idx {paragraph['idx']} repeats", f"paragraphs[{position}]")
        seen.add(document.doc_id)
        documents.append(document)
        if supporting:
            gold.append(document.doc_id)

    answerable = record.get("answerable", True)
    if not isinstance(answerable, bool):
        raise ctx.error(f"expected true or false, got {answerable!r}", "answerable")
    if answerable and not gold:
        # Recall and gold coverage of such a question would be NaN; HotpotQA, 2Wiki and QuALITY refuse it too.
        raise ctx.error("answerable record with no paragraph flagged is_supporting", "paragraphs")
    return Example(
        question_id=qid,
        question=question,
        answers=answers(answer, aliases, ctx, "answer_aliases"),
        gold_doc_ids=tuple(gold),
        documents=tuple(documents),
        hops=len(decomposition),
        qtype=qid.split("__", 1)[0] if "__" in qid else "",
        split=split,
        dataset=dataset,
        metadata={
            "answerable": answerable,
            "decomposition": tuple(_step(step) for step in decomposition),
        },
    )


def _paragraph(qid: str, position: int, paragraph: Any, ctx: RecordContext) -> tuple[Document, bool]:
    field = f"paragraphs[{position}]"
    if not isinstance(paragraph, dict):
        raise ctx.error(f"expected an object, got {type(paragraph).__name__}", field)
    for key, kind in (("idx", int), ("title", str), ("paragraph_text", str), ("is_supporting", bool)):
        value = paragraph.get(key)
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            problem = "missing" if key not in paragraph else f"not {kind.__name__}"
            raise ctx.error(f"{key!r} is {problem}", field)
    sentences = split_sentences(paragraph["paragraph_text"])
    if not sentences:
        raise ctx.error(f"paragraph {paragraph['title']!r} has no text", field)
    document = Document(
        doc_id=doc_id_for(qid, paragraph["idx"]),
        title=paragraph["title"].strip(),
        sentences=sentences,
    )
    return document, paragraph["is_supporting"]


def _step(step: Any) -> tuple[str, str]:
    """A decomposition step as (sub-question, sub-answer); kept for analysis, never required."""
    if isinstance(step, dict):
        return (str(step.get("question", "")), str(step.get("answer", "")))
    return (str(step), "")


FORMAT = register_format(
    DatasetFormat(
        layout="musique",
        looks="MuSiQue: id, paragraphs, question_decomposition",
        parse=parse_record,
        id_field=ID_FIELD,
        detect_record=has_keys("paragraphs", "question_decomposition"),
    )
)
