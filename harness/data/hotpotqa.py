"""HotpotQA records (distractor and fullwiki settings) as Examples.

Fields: ``_id, question, answer, supporting_facts [[title, sent_idx]], context [[title, [sentences]]],
type, level``. Gold documents are the context paragraphs whose title a supporting fact names;
``hops`` is the number of distinct supporting titles and ``qtype`` the record's ``type``
(bridge/comparison).

In the distractor setting every supporting title must be in the context. In the fullwiki setting
the context comes from a retriever, so supporting titles may be absent (or the context empty):
``gold_doc_ids`` then holds only the gold paragraphs present, ``hops`` still counts every supporting
title, and the absent ones are listed in ``metadata["missing_gold_titles"]``.
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
SETTINGS = ("distractor", "fullwiki")


def parse_record(
    record: dict[str, Any],
    ctx: RecordContext,
    *,
    dataset: str,
    split: str,
    setting: str = "distractor",
) -> Example:
    if setting not in SETTINGS:
        raise ValueError(f"unknown HotpotQA setting {setting!r}; expected one of {SETTINGS}")
    return supporting_facts_example(
        record,
        ctx,
        dataset=dataset,
        split=split,
        fullwiki=setting == "fullwiki",
        hint=" (a fullwiki file? load it with setting='fullwiki')",
        metadata={"setting": setting, "level": record.get("level", "")},
    )


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
