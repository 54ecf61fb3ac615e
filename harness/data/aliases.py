"""2WikiMultihopQA's answer aliases: ``id_aliases.json`` of the official release, read as its evaluator reads it.

The file is JSON lines, one Wikidata entity per line: ``{"Q_id": "Q38685497", "aliases": [...],
"demonyms": [...]}``. The official ``evaluate_v1.1`` scores a prediction against the record's ``answer``
plus the aliases and demonyms of its ``answer_id``; :func:`add_answer_aliases` gives each Example
those further gold answers. Without the file 2Wiki scores are a lower bound (an alias the reader
wrote, "USA" for "United States", scores 0), and the rows say so (``answers_lower_bound``).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from harness.core.types import Example
from harness.data.errors import DatasetFormatError
from harness.data.io import check_file, read_records

log = logging.getLogger(__name__)

ANSWER_ID = "answer_id"  # the metadata key the 2Wiki loader fills from the record's ``answer_id``
LOWER_BOUND = "answers_lower_bound"  # metadata key: True when aliases exist upstream but were not loaded


def read_aliases(path: str | Path) -> dict[str, tuple[str, ...]]:
    """Entity id -> its aliases then demonyms, from an ``id_aliases.json`` file (errors name the line's record)."""
    path = check_file(path, "alias file (dataset.aliases)")
    table: dict[str, tuple[str, ...]] = {}
    for index, record in enumerate(read_records(path)):
        entity = record.get("Q_id")
        if not isinstance(entity, str) or not entity.strip():
            raise DatasetFormatError(path, "missing or empty entity id", index=index, field="Q_id")
        names: list[str] = []
        for field in ("aliases", "demonyms"):
            values = record.get(field, [])
            if not isinstance(values, list):
                raise DatasetFormatError(
                    path, f"expected a list of names, got {type(values).__name__}", index, entity, field
                )
            for position, value in enumerate(values):
                if not isinstance(value, str):
                    raise DatasetFormatError(
                        path, f"entry {position} is {type(value).__name__}, not a string", index, entity, field
                    )
                names.append(value)
        table[entity] = tuple(names)
    return table


def add_answer_aliases(examples: Sequence[Example], path: str | Path | None) -> list[Example]:
    """Examples whose ``metadata['answer_id']`` names an entity of the alias file get its aliases and
    demonyms as further gold answers (blank and repeated ones dropped); with ``path=None`` every such
    Example is marked ``answers_lower_bound`` and one warning says so."""
    aliased = {id(e) for e in examples if e.metadata.get(ANSWER_ID)}
    if path is None:
        if aliased:
            log.warning(
                "%d questions carry an answer_id but dataset.aliases is not set: their answers lack the "
                "official aliases and demonyms (id_aliases.json), so EM/F1 are a lower bound",
                len(aliased),
            )
        return [replace(e, metadata={**e.metadata, LOWER_BOUND: True}) if id(e) in aliased else e for e in examples]
    table = read_aliases(path)
    out, extended = [], 0
    for example in examples:
        entity = example.metadata.get(ANSWER_ID)
        if not entity:
            out.append(example)
            continue
        answers = list(example.answers)
        for name in table.get(entity, ()):
            name = name.strip()
            if name and name not in answers:
                answers.append(name)
        extended += len(answers) > len(example.answers)
        out.append(replace(example, answers=tuple(answers), metadata={**example.metadata, LOWER_BOUND: False}))
    log.info("answer aliases: %d of %d questions gained gold answers from %s", extended, len(aliased), path)
    return out
