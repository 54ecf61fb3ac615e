"""The validation step every loader runs over its records, so no record is lost or doubled silently.

Each loader reads its own layout, then hands every record it keeps or drops to one
:class:`RecordChecks`: ids must be unique (a repeated id would make one question vanish and
another's row be written twice), and a record dropped by design (a 2WikiMultiHopQA row without
passages, an ExpertQA record without any system answer, an unlabelled QuALITY question) is counted
under its reason. :meth:`RecordChecks.finish` logs one warning per reason with its count and fails
when nothing is left.
"""

from __future__ import annotations

import logging
from collections import Counter
from os import PathLike
from pathlib import Path
from typing import Any

from harness.data.errors import DatasetFormatError
from harness.data.records import RecordContext

log = logging.getLogger(__name__)

_NO_CONTENT = object()
REPEATED_COPY = "that repeat an earlier record verbatim"


class RecordChecks:
    """Unique ids and counted skips for one file's records (``unit`` names them in messages)."""

    def __init__(self, path: str | PathLike[str], unit: str = "records") -> None:
        self.path = Path(path)
        self.unit = unit
        self._first: dict[Any, tuple[str, Any]] = {}  # id -> (where first seen, content)
        self.skipped: Counter[str] = Counter()  # reason -> count, in first-seen order

    def unique(
        self,
        key: Any,
        ctx: RecordContext,
        field: str | None,
        *,
        what: str = "question id",
        where: str | None = None,
        content: Any = _NO_CONTENT,
    ) -> bool:
        """Records ``key`` as seen; DatasetFormatError naming both places when it was seen before.

        With ``content``, a repeat whose content equals the first one's is a verbatim copy: it is
        counted as skipped and False is returned (the caller drops it); any other repeat is an error.
        """
        where = where or f"record {ctx.index}"
        if key in self._first:
            first_where, first_content = self._first[key]
            if content is not _NO_CONTENT and content == first_content:
                self.skip(REPEATED_COPY)
                return False
            # The id is named unless the record's own id already says it (or it is a composite key).
            named = f" {key!r}" if isinstance(key, str) and key != ctx.record_id else ""
            raise ctx.error(f"duplicate {what}{named} (first at {first_where})", field)
        self._first[key] = (where, content)
        return True

    def skip(self, reason: str) -> None:
        """Counts one record dropped by design; ``reason`` completes "records ...", e.g. "without 'context'"."""
        self.skipped[reason] += 1

    def finish(self, total: int, kept: int) -> None:
        """One warning per skip reason with its count; DatasetFormatError when no record is left."""
        for reason, count in self.skipped.items():
            log.warning("skipped %d of %d %s %s in %s", count, total, self.unit, reason, self.path)
        if kept:
            return
        if self.skipped:
            reasons = "; ".join(f"{count} {reason}" for reason, count in self.skipped.items())
            raise DatasetFormatError(self.path, f"no {self.unit} left out of {total}: {reasons}")
        raise DatasetFormatError(self.path, f"file holds no {self.unit}")
