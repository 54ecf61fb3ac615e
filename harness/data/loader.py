"""The loader every dataset config uses: a dataset file of any registered layout read into canonical Examples.

It reads the formats through the registry alone (:func:`harness.data.formats.formats`) and imports none of
them, so a format's module may call it (the long-document formats' public loaders do); the packaged formats
are registered by :mod:`harness.data.load`, which the package imports. With ``layout="auto"`` the layout is
recognised from the path first (a BEIR folder, a Parquet file, a SQuAD-style ``{"data": [...]}`` object),
else from the first record's keys, the formats tried in registration order. See :mod:`harness.data.records`
for how document ids are formed.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from harness.core.types import Example
from harness.data.aliases import add_answer_aliases
from harness.data.errors import DatasetFormatError, DatasetMismatchError, DatasetNotFoundError
from harness.data.formats import DatasetFormat, formats, layouts, option_owners, split_from_filename
from harness.data.io import read_records
from harness.data.records import RecordContext, peek_id
from harness.data.sampling import check_sample_size, subsample
from harness.data.validate import RecordChecks

__all__ = ["detect_layout", "load_dataset", "load_examples", "packaged_format", "split_from_filename"]


def detect_layout(record: dict[str, Any], path: str | Path) -> str:
    """The layout a record's keys identify (the first registered format whose ``detect_record``
    matches); DatasetFormatError naming the keys when none fits."""
    detectable = [record_format for record_format in formats().values() if record_format.detect_record is not None]
    for record_format in detectable:
        if record_format.detect_record is not None and record_format.detect_record(record):
            return record_format.layout
    raise DatasetFormatError(
        path,
        f"unknown layout: first record has keys {sorted(record)}; expected one of: "
        + "; ".join(record_format.looks for record_format in detectable),
        index=0,
        record_id=peek_id(record, "_id") or peek_id(record, "id"),
    )


def _format_of_path(path: Path) -> DatasetFormat | None:
    """The format a path itself shows (a BEIR folder, a Parquet file, a SQuAD-style object), if any."""
    for path_format in formats().values():
        if path_format.detect_path is not None and path_format.detect_path(path):
            return path_format
    return None


def _given_options(options: Mapping[str, Any]) -> dict[str, Any]:
    """The options set (not None), each taken by some registered layout; TypeError naming one none takes."""
    given = {option: value for option, value in options.items() if value is not None}
    for option in given:
        if not option_owners(option):
            raise TypeError(f"unknown dataset option {option!r}: no registered layout takes it")
    return given


def _check_options(record_format: DatasetFormat, given: Mapping[str, Any], detected_in: Path | None) -> None:
    """The options ``given`` must fit ``record_format``. When ``layout="auto"`` found the format in
    ``detected_in``, the DatasetFormatError names that file and the layout it looks like: the options
    usually come from a dataset config written for another layout, not from the user."""
    layout = record_format.layout
    for option, value in given.items():
        if option in record_format.options:
            continue
        owners = option_owners(option)
        plural = "s" if len(owners) > 1 else ""
        wrong = f"{option}={value!r} applies to the {', '.join(owners)} layout{plural} only"
        if detected_in is None:
            raise ValueError(f"{wrong}, not {layout!r}")
        configs = f"{record_format.configs}, or " if record_format.configs else ""
        raise DatasetFormatError(
            detected_in,
            f"layout=auto: the file looks like the {layout!r} layout ({record_format.looks}); {wrong}, "
            f"not {layout!r} (a dataset config may set it): for this file use {configs}layout={layout!r} "
            f"with {option} unset",
        )


def load_examples(
    path: str | Path | None = None,
    layout: str = "auto",
    *,
    name: str | None = None,
    split: str | None = None,
    setting: str | None = None,
    source: str | None = None,
    **options: Any,
) -> list[Example]:
    """Every record of ``path`` as an Example, in file order.

    ``layout``: a registered format's name (:func:`harness.data.formats.layouts`), or ``auto`` to
    recognise it. ``path=None`` reads the packaged demo set. ``name`` labels ``Example.dataset``
    (default: the layout's dataset name); ``split`` defaults to the one the file name states, else
    ``test``; ``setting`` (``distractor``/``fullwiki``) applies to HotpotQA only, default
    ``distractor``; ``source`` (``hotpotqa``/``2wikimultihopqa``/``musique``) to the IRCoT layout only,
    the benchmark its file was made from (default name ``{source}_ircot``). Further ``options`` are
    those the layout's format takes (the long-document formats' ``chunk_tokens``, ...); an option of
    another layout is refused.
    Raises DatasetFormatError naming file, record and field on malformed input, a repeated question
    id included; rows skipped by design (2WikiMultiHopQA rows without ``context``, ExpertQA records
    without answers or with bare-URL evidence only, RAGBench records without relevant sentence keys)
    are counted, one warning per reason.
    """
    registered = formats()
    if layout != "auto" and layout not in registered:
        raise ValueError(f"unknown layout {layout!r}; expected one of {layouts()}")
    given = _given_options({"setting": setting, "source": source, **options})
    if path is None:
        return _load_packaged(layout, name=name, split=split, options=given)

    path = Path(path)
    detected = layout == "auto"
    record_format = _format_of_path(path) if detected else registered[layout]
    if record_format is not None:
        _check_options(record_format, given, path if detected else None)
    for owner in registered.values():  # the options' values, before any file is read
        if owner.check_options is not None and any(option in given for option in owner.options):
            owner.check_options(given)
    if record_format is not None and record_format.load is not None:  # read whole, not record by record
        dataset = name or record_format.dataset_name(path, given)
        return record_format.load(path, dataset=dataset, split=split or record_format.default_split(path), **given)
    records = record_format.read(path) if record_format is not None else read_records(path)
    if record_format is None:
        record_format = registered[detect_layout(records[0], path)]
        _check_options(record_format, given, path)
    elif not detected:
        _check_layout_fits(record_format, records[0], path)
    dataset = name or record_format.dataset_name(path, given)
    return _parse_records(record_format, path, records, dataset, split or record_format.default_split(path), given)


def _check_layout_fits(record_format: DatasetFormat, record: dict[str, Any], path: Path) -> None:
    """DatasetMismatchError when a layout named on purpose is given another layout's file: the first
    record is recognised as that other layout (a format that extends another's fields, 2WikiMultiHopQA's
    over HotpotQA's, is recognised first). A format without a detector is taken at its word."""
    if record_format.detect_record is None:
        return
    fits = next((f for f in formats().values() if f.detect_record is not None and f.detect_record(record)), None)
    if fits is None or fits.layout == record_format.layout:
        return
    options = dict(fits.detect_options(record)) if fits.detect_options is not None else {}
    shown = ", ".join(f"{option}={value!r}" for option, value in options.items())
    raise DatasetMismatchError(
        path,
        f"the file looks like the {fits.layout!r} layout ({fits.looks}), not {record_format.layout!r}: "
        f"load it as layout={fits.layout!r}" + (f" with {shown}" if shown else ""),
        fits.layout,
        options,
        index=0,
        record_id=peek_id(record, fits.id_field) if fits.id_field else None,
    )


def packaged_format(layout: str) -> DatasetFormat:
    """The format whose packaged data file ``path=None`` reads for ``layout`` (for ``auto``, the first format
    that ships one); ValueError when ``layout`` ships none."""
    packaged = [record_format for record_format in formats().values() if record_format.packaged is not None]
    record_format = packaged[0] if layout == "auto" and packaged else formats().get(layout)
    if record_format is None or record_format.packaged is None:
        sets = " and ".join(packaged_format.layout for packaged_format in packaged) or "no"
        raise ValueError(f"layout {layout!r} needs a path; only the {sets} set is packaged")
    return record_format


def _load_packaged(layout: str, *, name: str | None, split: str | None, options: Mapping[str, Any]) -> list[Example]:
    """The packaged data file of ``layout`` (for ``auto``, of the first format that ships one)."""
    record_format = packaged_format(layout)
    assert record_format.packaged is not None
    with record_format.packaged() as packaged_path:
        return load_examples(packaged_path, record_format.layout, name=name, split=split, **options)


def _parse_records(
    record_format: DatasetFormat,
    path: Path,
    records: list[dict[str, Any]],
    dataset: str,
    split: str,
    options: Mapping[str, Any],
) -> list[Example]:
    """``records`` parsed by ``record_format``, those skipped by design counted, repeats refused."""
    assert record_format.parse is not None
    id_field = record_format.id_field
    identity = record_format.record_identity()
    examples: list[Example] = []
    checks = RecordChecks(path)
    for index, record in enumerate(records):
        ctx = RecordContext(path, index, peek_id(record, id_field) if id_field else None)
        reason = record_format.skip_reason(record) if record_format.skip_reason is not None else None
        if reason is not None:
            checks.skip(reason)
            continue
        example = record_format.parse(record, ctx, dataset=dataset, split=split, **options)
        checks.unique(identity.key(example), ctx, identity.field, what=identity.what)
        examples.append(example)
    checks.finish(len(records), len(examples))
    return examples


def load_dataset(
    path: str | Path | None = None,
    layout: str = "auto",
    sample_size: int | None = None,
    seed: int = 0,
    name: str | None = None,
    *,
    split: str | None = None,
    setting: str | None = None,
    source: str | None = None,
    aliases: str | Path | None = None,
    question_ids_file: str | Path | None = None,
    **options: Any,
) -> list[Example]:
    """Examples of a dataset file, optionally a reproducible subsample of at most ``sample_size``
    (:func:`harness.data.sampling.subsample`: drawn with ``seed``, in file order). A relative
    ``path`` is taken from the directory the program was started in, also under Hydra (which may
    change the working directory). ``path=None`` is the packaged demo set. ``aliases``: 2WikiMultihopQA's
    ``id_aliases.json``, whose aliases and demonyms of each record's ``answer_id`` become further gold
    answers, as in the official evaluator (:mod:`harness.data.aliases`). ``question_ids_file``: a text file of
    question ids, one per line; only those questions are kept (before the subsample), and every id listed must be
    in the file, so a study names exactly the questions its figures rest on. ``layout``, ``name``, ``split``,
    ``setting``, ``source`` and further ``options``: as :func:`load_examples` takes them.
    """
    check_sample_size(sample_size)  # before reading: a bad size fails at once
    named = "the demo set" if path is None else str(path)  # as the config gives it, for the warning
    # A size above the questions an id list chose is said of that list, not of the whole file.
    drawn_from = named if question_ids_file is None else f"the questions {question_ids_file} lists of {named}"
    if path is not None:
        path = _absolute(path)
    examples = load_examples(path, layout, name=name, split=split, setting=setting, source=source, **options)
    examples = add_answer_aliases(examples, None if aliases is None else _absolute(aliases))
    if question_ids_file is not None:
        examples = keep_listed(examples, _absolute(question_ids_file), named)
    return subsample(examples, sample_size, seed, source=drawn_from)


def keep_listed(examples: list[Example], ids_file: Path, named: str) -> list[Example]:
    """The examples whose question id ``ids_file`` lists (one per line, ``#`` comments), in file order; an
    error naming both files when a listed id is not among them."""
    try:
        lines = ids_file.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError as error:
        raise DatasetNotFoundError(ids_file, "dataset.question_ids_file does not exist") from error
    wanted = {line.split("#", 1)[0].strip() for line in lines} - {""}
    kept = [example for example in examples if example.question_id in wanted]
    missing = wanted - {example.question_id for example in kept}
    if missing:
        shown = ", ".join(sorted(missing)[:3])
        raise DatasetFormatError(
            ids_file, f"{len(missing)} of its {len(wanted)} question ids are not in {named} (e.g. {shown})"
        )
    return kept


def _absolute(path: str | Path) -> Path:
    # Hydra may run the job in its own directory; paths in configs mean the launch directory.
    from hydra.utils import to_absolute_path

    return Path(to_absolute_path(str(path)))
