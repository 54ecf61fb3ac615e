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

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from harness.core.types import Example
from harness.data.formats import DatasetFormat, has_keys, register_format
from harness.data.records import RecordContext
from harness.data.supporting_facts import ID_FIELD, supporting_facts_example

__all__ = ["FORMAT", "ID_FIELD", "SETTINGS", "parse_record", "supporting_facts_example"]

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


def _dataset_name(path: Path, options: Mapping[str, Any]) -> str:
    return "hotpotqa_fullwiki" if options.get("setting") == "fullwiki" else "hotpotqa"


FORMAT = register_format(
    DatasetFormat(
        layout="hotpotqa",
        looks="HotpotQA: _id, supporting_facts, context",
        default_name=_dataset_name,
        parse=parse_record,
        id_field=ID_FIELD,
        options=("setting",),
        # 2WikiMultiHopQA files have these fields too; its format registers first and also needs 'evidences'.
        detect_record=has_keys("_id", "supporting_facts"),
    )
)
