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

log = logging.getLogger(__name__)


def _json_default(value):
    if hasattr(value, "item"):
        return value.item()
    raise TypeError(f"cannot journal value of type {type(value).__name__}")


class RowJournal:
    def __init__(self, directory: Path, run_key: str) -> None:
        self.path = Path(directory) / "rows.journal.jsonl"
        self.key_path = Path(directory) / "rows.journal.key"
        self.run_key = run_key
        if self.path.exists() and (not self.key_path.exists() or self.key_path.read_text().strip() != run_key):
            stale = self.path.with_suffix(".stale.jsonl")
            os.replace(self.path, stale)
            log.warning("row journal in %s was written by another config; moved to %s", directory, stale.name)
        self.key_path.write_text(run_key)

    def load(self) -> dict[str, dict]:
        """Rows already produced, by question id. A torn last line (killed mid-write) is ignored."""
        rows: dict[str, dict] = {}
        if not self.path.exists():
            return rows
        with open(self.path, encoding="utf-8") as handle:
            for line in handle:
                if not line.endswith("\n"):
                    break
                try:
                    row = json.loads(line)
                except json.JSONDecodeError:
                    break
                rows[row["question_id"]] = row
        return rows

    def append(self, rows: list[dict]) -> None:
        if not rows:
            return
        payload = "".join(json.dumps(r, default=_json_default, allow_nan=True) + "\n" for r in rows)
        # Heal a torn tail from a killed writer so the next line starts cleanly.
        if self.path.exists() and self.path.stat().st_size:
            with open(self.path, "rb") as handle:
                handle.seek(-1, os.SEEK_END)
                if handle.read(1) != b"\n":
                    payload = "\n" + payload
        with open(self.path, "a", encoding="utf-8") as handle:
            handle.write(payload)
            handle.flush()
            os.fsync(handle.fileno())


def normalise_row(row: dict) -> dict:
    """The JSON round trip of a row, so fresh and journaled rows compare equal (NaN stays NaN)."""
    return {k: (float("nan") if isinstance(v, float) and math.isnan(v) else v)
            for k, v in json.loads(json.dumps(row, default=_json_default, allow_nan=True)).items()}
