"""Reading JSON lists and JSON lines into records, with errors that point at the broken spot.

A file whose first non-blank character is ``[`` is read as one JSON list; anything else as JSON
lines (one object per line, blank lines ignored). The list is decoded element by element so that a
truncated or corrupt file reports the record it broke in as well as the character position.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from harness.data.errors import DatasetFormatError

_DECODER = json.JSONDecoder()
_WHITESPACE = " \t\n\r"


def read_records(path: str | Path) -> list[dict[str, Any]]:
    """All records of a JSON-list or JSON-lines file, each checked to be a JSON object."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"dataset file not found: {path}")
    # utf-8-sig: files saved by some editors start with a byte-order mark.
    text = path.read_text(encoding="utf-8-sig")
    stripped = text.lstrip(_WHITESPACE)
    if not stripped:
        raise DatasetFormatError(path, "file is empty")
    records = _read_json_list(path, text) if stripped[0] == "[" else _read_json_lines(path, text)
    if not records:
        raise DatasetFormatError(path, "file holds no records")
    for index, record in enumerate(records):
        if not isinstance(record, dict):
            raise DatasetFormatError(
                path, f"expected a JSON object, got {type(record).__name__}", index=index
            )
    return records


def _read_json_lines(path: Path, text: str) -> list[Any]:
    records: list[Any] = []
    for line_number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError as exc:
            raise DatasetFormatError(
                path,
                f"invalid or truncated JSON on line {line_number}, column {exc.colno}: {exc.msg}",
                index=len(records),
            ) from exc
    return records


def _read_json_list(path: Path, text: str) -> list[Any]:
    records: list[Any] = []
    pos = _skip_whitespace(text, text.index("[") + 1)
    if text.startswith("]", pos):
        return _expect_end(path, text, pos + 1, records)
    while True:
        try:
            record, pos = _DECODER.raw_decode(text, pos)
        except json.JSONDecodeError as exc:
            raise _list_error(path, exc.msg, exc.pos, text, len(records)) from exc
        records.append(record)
        pos = _skip_whitespace(text, pos)
        if text.startswith(",", pos):
            pos = _skip_whitespace(text, pos + 1)
        elif text.startswith("]", pos):
            return _expect_end(path, text, pos + 1, records)
        else:
            reason = "file ends inside the list" if pos >= len(text) else "expected ',' or ']'"
            raise _list_error(path, reason, pos, text, len(records))


def _expect_end(path: Path, text: str, pos: int, records: list[Any]) -> list[Any]:
    pos = _skip_whitespace(text, pos)
    if pos != len(text):
        raise _list_error(path, "extra data after the closing ']'", pos, text, None)
    return records


def _list_error(
    path: Path, reason: str, pos: int, text: str, index: int | None
) -> DatasetFormatError:
    line = text.count("\n", 0, pos) + 1
    column = pos - (text.rfind("\n", 0, pos) + 1) + 1
    return DatasetFormatError(
        path,
        f"invalid or truncated JSON at char {pos} (line {line}, column {column}): {reason}",
        index=index,
    )


def _skip_whitespace(text: str, pos: int) -> int:
    while pos < len(text) and text[pos] in _WHITESPACE:
        pos += 1
    return pos
