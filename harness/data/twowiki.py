"""2WikiMultiHopQA records as Examples.

Fields: ``_id, type, question, context [[title, [sentences]]], supporting_facts, evidences, answer``.
Gold documents come from ``supporting_facts`` as in HotpotQA; ``hops`` is the number of distinct
supporting titles (2 or 4); ``qtype`` is ``type`` (comparison, inference, compositional,
bridge_comparison). Some released rows carry no ``context``; :func:`has_context` lets the loader
skip them (with one counted warning per file) instead of failing.
"""

from __future__ import annotations

from typing import Any

from harness.data.records import (
    RecordContext,
    answers,
    context_paragraphs,
    documents_from_paragraphs,
    match_supporting_facts,
    question_id,
    supporting_facts,
)
from harness.types import Example

ID_FIELD = "_id"


def has_context(record: dict[str, Any]) -> bool:
    """False for rows released without passages (no ``context`` key, or null)."""
    return record.get("context") is not None


def parse_record(record: dict[str, Any], ctx: RecordContext, *, dataset: str, split: str) -> Example:
    qid = question_id(record, ID_FIELD, ctx)
    question = ctx.text(record, "question")
    answer = ctx.text(record, "answer")
    qtype = ctx.get(record, "type", str).strip()
    facts = supporting_facts(record, ctx)
    paragraphs = context_paragraphs(record, ctx)
    gold = match_supporting_facts(qid, paragraphs, facts)
    if gold.missing_titles:
        raise ctx.error(
            f"supporting title(s) {list(gold.missing_titles)} not in the context", "supporting_facts"
        )
    evidences = record.get("evidences") or []
    return Example(
        question_id=qid,
        question=question,
        answers=answers(answer, (), ctx, "answer"),
        gold_doc_ids=gold.gold_doc_ids,
        documents=documents_from_paragraphs(qid, paragraphs),
        hops=len(gold.gold_titles),
        qtype=qtype,
        split=split,
        dataset=dataset,
        metadata={
            "supporting_sentences": gold.supporting_sentences,
            # (subject, relation, object) triples, kept for analysis.
            "evidences": tuple(tuple(e) for e in evidences if isinstance(e, (list, tuple))),
        },
    )
