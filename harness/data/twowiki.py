"""2WikiMultiHopQA records as Examples.

Fields: ``_id, type, question, context [[title, [sentences]]], supporting_facts, evidences, answer``.
Gold documents come from ``supporting_facts`` as in HotpotQA; ``hops`` is the number of distinct
supporting titles (2 or 4); ``qtype`` is ``type`` (comparison, inference, compositional,
bridge_comparison). ``answer_id`` (the answer's Wikidata entity) goes to ``metadata['answer_id']``, where
``dataset.aliases`` finds its aliases (:mod:`harness.data.aliases`). Some released rows carry no
``context``; :func:`has_context` lets the loader skip them (with one counted warning per file) instead of
failing.
"""

from __future__ import annotations

from typing import Any

from harness.core.types import Example
from harness.data.aliases import ANSWER_ID
from harness.data.formats import DatasetFormat, has_keys, register_format
from harness.data.records import RecordContext
from harness.data.supporting_facts import supporting_facts_example

ID_FIELD = "_id"


def has_context(record: dict[str, Any]) -> bool:
    """False for rows released without passages (no ``context`` key, or null)."""
    return record.get("context") is not None


def skip_reason(record: dict[str, Any]) -> str | None:
    """Why the loader skips a record by design, completing "records ..."; None to parse it."""
    return None if has_context(record) else "without 'context'"


def parse_record(record: dict[str, Any], ctx: RecordContext, *, dataset: str, split: str) -> Example:
    evidences = record.get("evidences") or []
    # (subject, relation, object) triples, kept for analysis.
    triples = tuple(tuple(e) for e in evidences if isinstance(e, (list, tuple)))
    # evaluate_v1.1 lower-cases titles before comparing supporting facts (harness.metrics.support).
    metadata: dict[str, Any] = {"evidences": triples, "supporting_fact_titles": "lowercase"}
    answer_id = record.get(ANSWER_ID)
    if answer_id is not None:
        if not isinstance(answer_id, str):
            raise ctx.error(f"expected a Wikidata id string, got {type(answer_id).__name__}", ANSWER_ID)
        metadata[ANSWER_ID] = answer_id.strip()  # looked up in dataset.aliases (harness.data.aliases)
    return supporting_facts_example(record, ctx, dataset=dataset, split=split, metadata=metadata)


FORMAT = register_format(
    DatasetFormat(
        layout="2wiki",
        looks="2WikiMultiHopQA: _id, supporting_facts, evidences, context",
        default_name="2wikimultihopqa",
        parse=parse_record,
        id_field=ID_FIELD,
        skip_reason=skip_reason,
        # 2WikiMultiHopQA adds (subject, relation, object) evidence triples to the HotpotQA fields: it
        # registers before HotpotQA, so its detector is tried first.
        detect_record=has_keys("_id", "supporting_facts", "evidences"),
    )
)
