"""Durable row journal: rows are appended (and fsynced) as each reading chunk finishes.

A run killed at any moment and started again in the same output directory picks up the journaled rows and
produces only the missing ones, so the final table has exactly the rows of an uninterrupted run. The journal
is tied to a key of the run's config; a journal written under another config is set aside, never mixed in.
"""

from __future__ import annotations

import json
import logging
import math
import os
from pathlib import Path

from harness.core import signals
from harness.core.stage import scalar
from harness.runlog.outputs import atomic_write_bytes

log = logging.getLogger(__name__)


def _json_default(value):
    if hasattr(value, "item"):
        return value.item()
    raise TypeError(f"cannot journal value of type {type(value).__name__}")


# One encoder for every line: ``json.dumps`` with options builds a new one per call, a third of the time of
# encoding a sweep job's rows.
_LINE_ENCODER = json.JSONEncoder(default=_json_default, allow_nan=True)


class RowJournal:
    def __init__(self, directory: Path, run_key: str) -> None:
        self.path = Path(directory) / "rows.journal.jsonl"
        self.key_path = Path(directory) / "rows.journal.key"
        self.run_key = run_key
        if self.path.exists() and (
            not self.key_path.exists() or self.key_path.read_bytes().strip() != run_key.encode()
        ):
            stale = self.path.with_suffix(".stale.jsonl")
            os.replace(self.path, stale)
            log.warning("row journal in %s was written by another config; moved to %s", directory, stale.name)
        self.key_path.write_text(run_key)

    def load(self) -> dict[str, dict]:
        """Rows already produced, by question id.

        A damaged line (a torn tail from a killed writer, bytes that are not JSON, a record without a
        ``question_id``) is logged with the journal's path and line number and dropped; the valid rows before
        and after it are kept, and the journal is rewritten without the damaged lines so they are reported
        once and rows after them are never produced twice.
        """
        rows: dict[str, dict] = {}
        if not self.path.exists():
            return rows
        damaged: list[str] = []
        kept: list[bytes] = []
        with open(self.path, "rb") as handle:
            data = handle.read()
        lines = data.split(b"\n")
        for number, raw in enumerate(lines, start=1):
            if not raw.strip():
                continue
            torn = number == len(lines)  # no newline after it: the writer was killed mid-line
            try:
                row = json.loads(raw.decode("utf-8"))
                if not isinstance(row, dict) or not isinstance(row.get("question_id"), str):
                    raise ValueError("no question_id")
            except ValueError as error:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
                damaged.append(f"line {number}{' (torn, no newline)' if torn else ''}: {error}")
                continue
            if torn:
                damaged.append(f"line {number} (torn, no newline): complete record kept")
            rows[row["question_id"]] = row
            kept.append(raw)
        if damaged:
            log.warning(
                "row journal %s is damaged; keeping %d valid rows, dropping: %s",
                self.path,
                len(kept),
                "; ".join(damaged[:5]) + (" ..." if len(damaged) > 5 else ""),
            )
            atomic_write_bytes(self.path, b"".join(line + b"\n" for line in kept))
        return rows

    def append(self, rows: list[dict]) -> None:
        if not rows:
            return
        payload = "".join(_LINE_ENCODER.encode(r) + "\n" for r in rows)
        # Heal a torn tail from a killed writer so the next line starts cleanly.
        if self.path.exists() and self.path.stat().st_size:
            with open(self.path, "rb") as handle:
                handle.seek(-1, os.SEEK_END)
                if handle.read(1) != b"\n":
                    payload = "\n" + payload
        # A stop signal waits until the chunk is on disk whole.
        with signals.deferred(), open(self.path, "a", encoding="utf-8") as handle:
            handle.write(payload)
            handle.flush()
            os.fsync(handle.fileno())


def normalise_row(row: dict) -> dict:
    """What a row's JSON round trip gives back, so fresh and journaled rows compare equal (NaN stays NaN).

    Every value leaves as a scalar (lists and dicts as JSON strings, ``harness.core.stage.scalar``), so a
    journaled row and a Parquet cell hold the same thing; a value of any other type names its column. A
    scalar's round trip only drops its subclass (an int enum comes back an int, NumPy values Python ones), so
    that is done directly rather than through the encoder: a sweep builds tens of thousands of rows.
    """
    return {
        k: v if v is None or type(v) in _AS_THEY_ARE else _as_json_reads_it(scalar(v, f"row column {k!r}"))
        for k, v in row.items()
    }


_AS_THEY_ARE = frozenset({str, bool, int})  # exactly these types: what a JSON round trip gives back


def _as_json_reads_it(value):
    """``json.loads(json.dumps(value))`` for what ``scalar`` returns, with NaN as ``float("nan")``."""
    if value is None or type(value) in _AS_THEY_ARE:
        return value
    if isinstance(value, int):  # an int subclass: an enum, say
        return int(value)
    if isinstance(value, float):
        return float("nan") if math.isnan(value) else float(value)
    return str.__str__(value)  # a str subclass's text as a plain str
