"""Dataset formats: one :class:`DatasetFormat` record per file layout, in one registry.

The module that parses a layout declares its record and registers it with :func:`register_format`;
the loader (:mod:`harness.data.load`) reads every layout through the registry alone: detection,
reading, parsing, question ids, default dataset names, skips by design and what makes two records
the same question. A format from outside the package registers the same way and is then loaded by
``harness.data.load_dataset`` (``layout=`` its name, or recognised with ``layout="auto"``).

Registration order is detection order: with ``layout="auto"`` the first format whose detector
matches wins, so a format whose fields extend another's registers before it (2WikiMultiHopQA before
HotpotQA). Formats from outside register after the packaged ones and are tried after them.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.core.types import Example
from harness.data.io import read_records

_SPLIT_WORDS = {"train": "train", "dev": "dev", "validation": "dev", "val": "dev", "test": "test"}


def split_from_filename(path: str | Path) -> str:
    """``train``/``dev``/``test`` when the file name says so (``hotpot_dev_...``), else ``test``."""
    for word in re.split(r"[^a-z]+", Path(path).name.lower()):
        if word in _SPLIT_WORDS:
            return _SPLIT_WORDS[word]
    return "test"


def has_keys(*keys: str) -> Callable[[dict[str, Any]], bool]:
    """A ``detect_record`` predicate: the record has every one of ``keys``."""
    wanted = frozenset(keys)
    return lambda record: wanted <= record.keys()


@dataclass(frozen=True)
class Identity:
    """What makes two parsed records the same question: ``key`` of each Example must not repeat in a
    file; ``what`` names the key in the message and ``field`` the record field it points at."""

    key: Callable[[Example], Any]
    what: str
    field: str | None


def question_id_identity(id_field: str | None) -> Identity:
    """The usual identity: the question id, read from ``id_field``."""
    return Identity(lambda example: example.question_id, "question id", id_field)


@dataclass(frozen=True)
class DatasetFormat:
    """One dataset layout, as the loader reads it.

    A format is read one of two ways. Per record (``parse``): ``read(path)`` gives the records, and
    each not skipped by design (``skip_reason(record)`` returns the reason, completing "records ...")
    becomes ``parse(record, ctx, *, dataset, split, **options)``, a RecordContext naming the record
    by its ``id_field``; parsed records must differ in ``identity`` (default: the question id).
    Whole source (``load``): ``load(path, *, dataset, split, **options)`` returns every Example of a
    file or folder, checking its own records (a SQuAD-style file, a BEIR folder, long documents).

    ``layout``: the name ``layout=`` takes. ``looks``: what a file of it looks like, for messages.
    ``default_name``: ``Example.dataset`` when no name is given, a string or a function of the path
    and the options given (unset: the layout's name). ``default_split``: the split when none is given, from the path.
    ``options``: the keyword options the layout takes beyond name and split (``setting``,
    ``source``, ``chunk_tokens``, ...); another layout's option is refused. ``check_options`` checks
    the options given before any file is read. ``configs``: the dataset configs of the layout, named
    when ``layout="auto"`` finds it with options that do not fit. ``detect_path``: recognises the
    layout from the path alone (a folder, a suffix, the first bytes) before anything is read;
    ``detect_record``: from the first record of a JSON-list or JSON-lines file. A format with
    neither is read only when named. ``detect_options``: the options a record shows it needs (IRCoT's
    ``source``), for naming the config that fits a file loaded as another layout. ``packaged``: a
    context manager giving the path of a data file
    shipped with the package, read when no path is given.
    """

    layout: str
    looks: str
    default_name: str | Callable[[Path, Mapping[str, Any]], str] | None = None
    parse: Callable[..., Example] | None = None
    load: Callable[..., list[Example]] | None = None
    id_field: str | None = None
    read: Callable[[Path], list[dict[str, Any]]] = read_records
    skip_reason: Callable[[dict[str, Any]], str | None] | None = None
    identity: Identity | None = None
    default_split: Callable[[Path], str] = split_from_filename
    options: tuple[str, ...] = ()
    check_options: Callable[[Mapping[str, Any]], None] | None = None
    configs: str = ""
    detect_path: Callable[[Path], bool] | None = None
    detect_record: Callable[[dict[str, Any]], bool] | None = None
    detect_options: Callable[[dict[str, Any]], Mapping[str, Any]] | None = None
    packaged: Callable[[], AbstractContextManager[Path]] | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.layout, str) or not re.fullmatch(r"[a-z0-9][a-z0-9_]*", self.layout):
            raise ValueError(f"format layout must be a lower-case name, got {self.layout!r}")
        if self.layout == "auto":
            raise ValueError("'auto' is not a layout: it asks the loader to recognise one")
        if (self.parse is None) == (self.load is None):
            raise ValueError(f"format {self.layout!r} needs exactly one of parse (per record) and load (whole source)")
        if not self.looks:
            raise ValueError(f"format {self.layout!r} needs 'looks' (what its files look like, for messages)")
        if self.load is not None and (self.skip_reason or self.identity or self.detect_record):
            raise ValueError(f"format {self.layout!r}: skip_reason, identity and detect_record apply to parse only")

    @property
    def whole_source(self) -> bool:
        """True when the format loads a file or folder at once instead of parsing its records."""
        return self.load is not None

    def dataset_name(self, path: Path, options: Mapping[str, Any]) -> str:
        """``Example.dataset`` when no name is given."""
        if self.default_name is None:
            return self.layout
        return self.default_name if isinstance(self.default_name, str) else self.default_name(path, options)

    def record_identity(self) -> Identity:
        return self.identity or question_id_identity(self.id_field)


_FORMATS: dict[str, DatasetFormat] = {}


def register_format(record: DatasetFormat) -> DatasetFormat:
    """Add ``record`` to the registry and return it; ValueError naming it when its layout is taken.

    The loader (``harness.data.load_dataset`` / ``load_examples``) then reads files of it by
    ``layout=record.layout`` and, when the record has a detector, with ``layout="auto"``. Formats
    are tried for ``layout="auto"`` in registration order after the packaged ones, so a detector
    should match only its own files. A module outside the package registers its format when it is
    imported, so it is imported before the load: by the script or test that loads, or as the module a
    dataset config's ``_target_`` names (a loader of its own that calls ``load_dataset``).

    Example::

        register_format(DatasetFormat(layout="toyqa", looks="ToyQA: qid, ask, reply", parse=parse_record,
                                      id_field="qid", detect_record=has_keys("qid", "ask")))
    """
    if not isinstance(record, DatasetFormat):
        raise TypeError(f"expected a DatasetFormat, got {type(record).__name__}")
    if record.layout in _FORMATS:
        raise ValueError(f"dataset format {record.layout!r} is already registered")
    _FORMATS[record.layout] = record
    return record


def unregister_format(layout: str) -> DatasetFormat:
    """Remove a registered format (for tests registering a format of their own); KeyError if absent."""
    return _FORMATS.pop(layout)


def formats() -> Mapping[str, DatasetFormat]:
    """Every registered format by layout name, in registration (detection) order."""
    return dict(_FORMATS)


def get_format(layout: str) -> DatasetFormat | None:
    return _FORMATS.get(layout)


def layouts() -> tuple[str, ...]:
    """The values ``layout=`` takes: ``auto`` and every registered layout."""
    return ("auto", *_FORMATS)


def option_owners(option: str) -> list[str]:
    """The layouts that take ``option``, in registration order."""
    return [layout for layout, record in _FORMATS.items() if option in record.options]
