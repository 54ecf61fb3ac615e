"""The one error every loader raises for malformed input, so a bad file is found without a debugger."""

from __future__ import annotations

from collections.abc import Mapping
from os import PathLike
from typing import Any


class DatasetFormatError(ValueError):
    """A dataset file that cannot be read as its layout promises.

    The message names the file, the record (position in the file and question id) and the field,
    e.g. ``hotpot.json: record 17 (id '5a8b...'): field 'context': empty context``.
    """

    def __init__(
        self,
        path: str | PathLike[str],
        message: str,
        index: int | None = None,
        record_id: str | None = None,
        field: str | None = None,
    ) -> None:
        self.path = str(path)
        self.message = message
        self.index = index
        self.record_id = record_id
        self.field = field
        super().__init__(self._render())

    def _render(self) -> str:
        parts = [self.path]
        if self.index is not None or self.record_id is not None:
            record = "record" if self.index is None else f"record {self.index}"
            if self.record_id is not None:
                record += f" (id {self.record_id!r})"
            parts.append(record)
        if self.field is not None:
            parts.append(f"field {self.field!r}")
        parts.append(self.message)
        return ": ".join(parts)

    def __reduce__(self):
        # Keyword-style constructors do not survive pickling by default (multiprocess launchers).
        return (type(self), (self.path, self.message, self.index, self.record_id, self.field))


class DatasetNotFoundError(DatasetFormatError, FileNotFoundError):
    """A dataset path that does not exist; also a FileNotFoundError, for callers that catch that."""


class DatasetMismatchError(DatasetFormatError):
    """A file of another benchmark or layout than the one it is loaded as. ``layout`` and ``options`` are
    what fit the file (``"ircot"``, ``{"source": "hotpotqa"}``), so a caller can name the config to use."""

    def __init__(
        self,
        path: str | PathLike[str],
        message: str,
        layout: str,
        options: Mapping[str, Any] | None = None,
        index: int | None = None,
        record_id: str | None = None,
        field: str | None = None,
    ) -> None:
        self.layout = layout
        self.options = dict(options or {})
        super().__init__(path, message, index, record_id, field)

    def __reduce__(self):
        arguments = (self.path, self.message, self.layout, self.options, self.index, self.record_id, self.field)
        return (type(self), arguments)
