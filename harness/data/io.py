"""Reading dataset files into text and records, with errors that point at the broken spot.

:func:`read_text` is the one way every loader opens a file: a missing path, a directory, or bytes
that are not UTF-8 become a DatasetFormatError naming the path (and, for bad bytes, the byte
offset, line and record), never a bare OSError or a decode error that carries the whole file.

A file whose first non-blank character is ``[`` is read as one JSON list; anything else as JSON
lines (one object per line, blank lines ignored). The list is decoded element by element so that a
truncated or corrupt file reports the record it broke in as well as the character position.
"""

from __future__ import annotations

import codecs
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness.data.errors import DatasetFormatError, DatasetNotFoundError

_DECODER = json.JSONDecoder()
# A wrapper object ({"data": [...], "version": ...}) holds the records beside at most a couple of metadata keys;
# every record layout the loaders read carries more fields than this, so an object this small with a list of
# objects inside is taken for a wrapper, not a record.
WRAPPER_MAX_KEYS = 3
_WHITESPACE = " \t\n\r"


def check_file(path: str | Path, what: str = "dataset file") -> Path:
    """``path`` as a Path, or DatasetFormatError naming it when it is missing or not a regular file."""
    path = Path(path)
    if not path.exists():
        raise DatasetNotFoundError(path, f"{what} not found")
    if path.is_dir():
        raise DatasetFormatError(path, f"is a directory, not a {what}")
    if not path.is_file():
        raise DatasetFormatError(path, f"is not a regular file (expected a {what})")
    return path


def read_text(
    path: str | Path,
    locate: Callable[[str], int | None] | None = None,
    what: str = "dataset file",
) -> str:
    """The file's text, decoded as UTF-8 (a leading byte-order mark dropped).

    On bytes that are not UTF-8 the error names the byte offset and line; ``locate``, given the
    (valid) text before the bad byte, returns the index of the record the byte falls in.
    """
    path = check_file(path, what)
    data = path.read_bytes()
    # Some editors save a byte-order mark; offsets below count it, as a hex editor would.
    bom = len(codecs.BOM_UTF8) if data.startswith(codecs.BOM_UTF8) else 0
    try:
        return data[bom:].decode("utf-8")
    except UnicodeDecodeError as exc:
        offset = bom + exc.start
        line = data.count(b"\n", 0, offset) + 1
        index = locate(data[bom:offset].decode("utf-8")) if locate is not None else None
        # "from None": the decode error's repr holds every byte of the file (tens of MB).
        raise DatasetFormatError(
            path,
            f"not UTF-8: byte 0x{data[offset]:02x} at byte offset {offset} (line {line}): {exc.reason}",
            index=index,
        ) from None


def read_records(path: str | Path) -> list[dict[str, Any]]:
    """All records of a JSON-list or JSON-lines file, each checked to be a JSON object."""
    path = Path(path)
    text = read_text(path, locate=lambda prefix: json_record_at(path, prefix))
    stripped = text.lstrip(_WHITESPACE)
    if not stripped:
        raise DatasetFormatError(path, "file is empty")
    if stripped[0] == "{":
        _refuse_single_object(path, text)
    records = _read_json_list(path, text) if stripped[0] == "[" else _read_json_lines(path, text)
    if not records:
        raise DatasetFormatError(path, "file holds no records")
    for index, record in enumerate(records):
        if not isinstance(record, dict):
            raise DatasetFormatError(path, f"expected a JSON object, got {type(record).__name__}", index=index)
    return records


def _refuse_single_object(path: Path, text: str) -> None:
    """A file that is one JSON object is valid JSON lines only when it is one line and is itself a record:
    a pretty-printed object, or a wrapper such as ``{"data": [...]}``, is refused with what was found."""
    try:
        whole = json.loads(text)
    except json.JSONDecodeError:
        return  # several lines of JSON objects (JSON lines), or broken JSON: reported where it breaks
    if not isinstance(whole, dict):
        return
    wrapped = [key for key, value in whole.items() if isinstance(value, list) and value and isinstance(value[0], dict)]
    if wrapped and len(whole) <= WRAPPER_MAX_KEYS:
        key = wrapped[0]
        raise DatasetFormatError(
            path,
            f"expected a JSON list or JSON lines, found one JSON object whose {key!r} holds a list of "
            f"{len(whole[key])} objects: give the list itself (e.g. jq '.{key}' file.json)",
            field=key,
        )
    lines = sum(1 for line in text.split("\n") if line.strip())
    if lines > 1:
        raise DatasetFormatError(
            path,
            f"expected a JSON list or JSON lines (one object per line), found one JSON object over {lines} lines: "
            "put the records in a list [...] or one per line",
        )


def json_record_at(path: Path, prefix: str) -> int | None:
    """Index of the record of a JSON-list or JSON-lines file that continues past ``prefix``."""
    stripped = prefix.lstrip(_WHITESPACE)
    if not stripped:
        return 0
    if stripped[0] != "[":
        # Only "\n" ends a JSON line: the partial last line is the record the prefix breaks off in.
        return sum(1 for line in prefix.split("\n")[:-1] if line.strip())
    try:
        decode_list(path, prefix, prefix.index("["))
    except DatasetFormatError as exc:
        return exc.index
    return None  # the list closed before the prefix ended


def _read_json_lines(path: Path, text: str) -> list[Any]:
    records: list[Any] = []
    # split("\n"), not splitlines(): a JSON string may hold a raw U+2028 or form feed, which
    # splitlines() would treat as a line break and cut the record in two.
    for line_number, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError as exc:
            raise DatasetFormatError(
                path,
                f"invalid or truncated JSON on line {line_number}, column {exc.colno}: {exc.msg}",
                index=len(records),
            ) from None
    return records


def _read_json_list(path: Path, text: str) -> list[Any]:
    records, pos = decode_list(path, text, text.index("["))
    pos = _skip_whitespace(text, pos)
    if pos != len(text):
        raise _list_error(path, "extra data after the closing ']'", pos, text, None)
    return records


def decode_list(path: Path, text: str, start: int) -> tuple[list[Any], int]:
    """The JSON list whose ``[`` is at ``text[start]``, element by element, and the position after
    its ``]``; errors give the element index and the character position in ``text``."""
    records: list[Any] = []
    pos = _skip_whitespace(text, start + 1)
    if text.startswith("]", pos):
        return records, pos + 1
    while True:
        try:
            record, pos = _DECODER.raw_decode(text, pos)
        except json.JSONDecodeError as exc:
            raise _list_error(path, exc.msg, exc.pos, text, len(records)) from None
        records.append(record)
        pos = _skip_whitespace(text, pos)
        if text.startswith(",", pos):
            pos = _skip_whitespace(text, pos + 1)
        elif text.startswith("]", pos):
            return records, pos + 1
        else:
            reason = "file ends inside the list" if pos >= len(text) else "expected ',' or ']'"
            raise _list_error(path, reason, pos, text, len(records))


def _list_error(path: Path, reason: str, pos: int, text: str, index: int | None) -> DatasetFormatError:
    return DatasetFormatError(path, f"invalid or truncated JSON at {text_position(text, pos)}: {reason}", index=index)


def text_position(text: str, pos: int) -> str:
    """``char N (line L, column C)`` for a character position, as error messages give it."""
    line = text.count("\n", 0, pos) + 1
    column = pos - (text.rfind("\n", 0, pos) + 1) + 1
    return f"char {pos} (line {line}, column {column})"


def _skip_whitespace(text: str, pos: int) -> int:
    while pos < len(text) and text[pos] in _WHITESPACE:
        pos += 1
    return pos
