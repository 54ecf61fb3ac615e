"""Retrieval results in the DPR layout (NQ-Open, TriviaQA, ... after a DPR-style retriever) as Examples.

Records: ``{question, answers [str], ctxs [{id, title, text, score, has_answer}]}`` (a JSON list,
as DPR's ``dense_retriever.py`` writes it, or JSON lines). The documents are the ``ctxs`` in their
retrieved order, ids ``f"{question_id}::{ctx id}"``; gold documents are those flagged
``has_answer`` (the answer string occurs in the passage: DPR's own distant-supervision label).
The retriever's ``score`` of each context is kept in ``metadata["retriever_scores"]``. Records
carry no id unless they have an ``id`` field; otherwise the position in the file stands in (DPR
results are aligned with the question file by position).
"""

from __future__ import annotations

from typing import Any

from harness.core.types import Document, Example
from harness.data.formats import DatasetFormat, has_keys, register_format
from harness.data.record_lists import each_object
from harness.data.records import RecordContext, answers, doc_id_for, peek_id
from harness.text.sentences import split_sentences

ID_FIELD = "id"


def parse_record(record: dict[str, Any], ctx: RecordContext, *, dataset: str, split: str) -> Example:
    qid = peek_id(record, ID_FIELD) or str(ctx.index)
    question = ctx.text(record, "question")
    raw_answers = ctx.get(record, "answers", list)
    texts = [a.strip() for a in raw_answers if isinstance(a, str) and a.strip()]
    if len(texts) != len(raw_answers) or not texts:
        raise ctx.error("expected a non-empty list of non-blank answer strings", "answers")
    ctxs = ctx.items(record, "ctxs", "empty context")

    documents: list[Document] = []
    gold: list[str] = []
    scores: list[float] = []
    seen: set[str] = set()
    for field, passage in each_object(ctxs, ctx, "ctxs"):
        pid = peek_id(passage, "id")
        text = passage.get("text")
        if pid is None:
            raise ctx.error("missing or invalid 'id'", field)
        if not isinstance(text, str) or not text.strip():
            raise ctx.error("missing or empty 'text'", field)
        doc_id = doc_id_for(qid, pid)
        if doc_id in seen:
            raise ctx.error(f"passage id {pid!r} repeats", field)
        seen.add(doc_id)
        documents.append(Document(doc_id, str(passage.get("title") or "").strip(), split_sentences(text)))
        if passage.get("has_answer") is True:
            gold.append(doc_id)
        score = passage.get("score")
        scores.append(float(score) if isinstance(score, (int, float, str)) and _is_number(score) else float("nan"))

    return Example(
        question_id=qid,
        question=question,
        answers=answers(texts[0], texts[1:], ctx, "answers"),
        gold_doc_ids=tuple(gold),
        documents=tuple(documents),
        hops=1,
        split=split,
        dataset=dataset,
        metadata={"retriever_scores": tuple(scores)},
    )


def _is_number(value: Any) -> bool:
    try:
        float(value)
    except (TypeError, ValueError):
        return False
    return True


FORMAT = register_format(
    DatasetFormat(
        layout="dpr",
        looks="DPR retrieval results: question, answers, ctxs",
        default_name="nq_open",
        parse=parse_record,
        id_field=ID_FIELD,
        detect_record=has_keys("question", "answers", "ctxs"),
    )
)
