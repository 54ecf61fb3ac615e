"""Reading JSON lists and JSON lines, and the errors for files that are not either."""

from __future__ import annotations

import json

import pytest

from harness.data.errors import DatasetFormatError
from harness.data.io import read_records


def test_json_list_and_json_lines_read_the_same(tmp_path):
    records = [{"a": 1, "b": [1, 2]}, {"a": 2, "b": []}]
    listed = tmp_path / "x.json"
    listed.write_text("\n  " + json.dumps(records, indent=2) + "\n")
    lines = tmp_path / "x.jsonl"
    lines.write_text("\n".join(json.dumps(r) for r in records) + "\n\n")
    assert read_records(listed) == read_records(lines) == records


def test_byte_order_mark_is_ignored(tmp_path):
    path = tmp_path / "bom.json"
    path.write_bytes("\ufeff".encode() + b'[{"a": 1}]')
    assert read_records(path) == [{"a": 1}]


@pytest.mark.parametrize(
    ("content", "fragment"),
    [
        ("", "file is empty"),
        ("  \n ", "file is empty"),
        ("[]", "file holds no records"),
        ('[{"a": 1}] {"b": 2}', "extra data after the closing ']'"),
        (
            '[{"a": 1} {"b": 2}]',
            "record 1: invalid or truncated JSON at char 10 (line 1, column 11): expected ',' or ']'",
        ),
        (
            '[{"a": 1},\n {"b": 2}',
            "record 2: invalid or truncated JSON at char 20 (line 2, column 10): file ends inside the list",
        ),
        ('[{"a": 1},\n {"b": ', "record 1: invalid or truncated JSON at char 18 (line 2, column 8): Expecting value"),
        ('[{"a": 1}, 3]', "record 1: expected a JSON object, got int"),
    ],
)
def test_malformed_json_list(tmp_path, content, fragment):
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(DatasetFormatError) as info:
        read_records(path)
    assert str(info.value).startswith(f"{path}: ")
    assert fragment in str(info.value)


def test_malformed_json_lines(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text('{"a": 1}\n["not", "an", "object"]\n')
    with pytest.raises(DatasetFormatError, match=r"record 1: expected a JSON object, got list"):
        read_records(path)
    path.write_text('{"a": 1}\n{"a": 2\n')
    with pytest.raises(DatasetFormatError, match=r"record 1: invalid or truncated JSON on line 2, column 8"):
        read_records(path)


def test_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="absent.json"):
        read_records(tmp_path / "absent.json")
