"""The Example HotpotQA and 2WikiMultiHopQA records share: question, answer, supporting facts, context.

Its own module, not HotpotQA's, so that importing 2WikiMultiHopQA does not register HotpotQA's format
before it (registration order is detection order, :mod:`harness.data.formats`).
"""

from __future__ import annotations

from typing import Any

from harness.core.types import Example
from harness.data.records import (
    RecordContext,
    answers,
    context_paragraphs,
    documents_from_paragraphs,
    match_supporting_facts,
    question_id,
    supporting_facts,
)

ID_FIELD = "_id"


def supporting_facts_example(
    record: dict[str, Any],
    ctx: RecordContext,
    *,
    dataset: str,
    split: str,
    fullwiki: bool = False,
    hint: str = "",
    metadata: dict[str, Any] | None = None,
) -> Example:
    """An Example from the fields HotpotQA and 2WikiMultiHopQA share (``_id, question, answer, type,
    supporting_facts, context``), with ``metadata`` added to the supporting sentences.

    Unless ``fullwiki``, a supporting title missing from the context is an error (``hint`` follows its
    message); with it the context may be empty and the missing titles are listed in the metadata."""
    qid = question_id(record, ID_FIELD, ctx)
    question = ctx.text(record, "question")
    answer = ctx.text(record, "answer")
    qtype = ctx.get(record, "type", str).strip()
    facts = supporting_facts(record, ctx)
    paragraphs = context_paragraphs(record, ctx, allow_empty=fullwiki)
    gold = match_supporting_facts(qid, paragraphs, facts)
    if gold.missing_titles and not fullwiki:
        raise ctx.error(f"supporting title(s) {list(gold.missing_titles)} not in the context{hint}", "supporting_facts")
    # The record's facts as given (indices past a paragraph's end included): the official sp metrics'
    # gold set (harness.metrics.support).
    metadata = {
        **(metadata or {}),
        "supporting_sentences": gold.supporting_sentences,
        "supporting_facts": tuple(facts),
    }
    if fullwiki:
        metadata["missing_gold_titles"] = gold.missing_titles
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
        metadata=metadata,
    )
