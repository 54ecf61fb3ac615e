"""Reader numerics in the report: rows of one reader computed with different numerics are never pooled.

Every row names how its answer was computed in ``reader_numerics``: backend, weights' format, dtype and
device (``transformers/hf/bfloat16/cpu-amx``, ``llama_cpp/gguf-Q4_K_M/gguf/cpu-amx``;
``harness.read.base.Reader.numerics``). One reader config can compute with different numerics on different
machines (the default reader runs transformers in bf16 on a CPU with bf16 instructions and llama.cpp
elsewhere), so runs gathered from several machines may hold answers of one reader computed two ways.

When the rows of one ``reader`` value carry more than one numerics, each numerics becomes a reader of its
own, ``qwen2.5-coder-0.5b [transformers/hf/bfloat16/cpu-amx]``: the reader then varies, is part of every
policy's name, and a contrast pairs only rows of the same numerics. Rows written before the column existed
count as one numerics, ``unknown``. A reader whose rows share one numerics keeps its name.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import pandas as pd

READER = "reader"
NUMERICS = "reader_numerics"
UNKNOWN = "unknown"  # rows from before the column, or rows that left it empty


@dataclass(frozen=True)
class NumericsSplit:
    """One reader whose rows came with several numerics: each numerics with its number of rows."""

    reader: str
    counts: tuple[tuple[str, int], ...]


def _name(value) -> str:
    missing = value is None or (isinstance(value, float) and math.isnan(value))
    return "-" if missing else str(value)


def numerics_of(rows: pd.DataFrame) -> pd.Series:
    """Each row's reader numerics as text, ``unknown`` where the rows do not say."""
    if NUMERICS not in rows.columns:
        return pd.Series(UNKNOWN, index=rows.index, dtype=object)
    names = rows[NUMERICS].map(_name)
    return names.where(~names.isin(["-", ""]), UNKNOWN).astype(object)


def reader_label(reader: str, numerics: str) -> str:
    """The name of one reader's rows of one numerics once its numerics are told apart."""
    return f"{reader} [{numerics}]"


def _counts(readers: pd.Series, numerics: pd.Series) -> dict[str, dict[str, int]]:
    sizes = pd.DataFrame({"reader": readers, "numerics": numerics}).groupby(["reader", "numerics"], sort=True).size()
    counts: dict[str, dict[str, int]] = {}
    for (reader, value), n in sizes.items():
        counts.setdefault(str(reader), {})[str(value)] = int(n)
    return counts


def split_reader_numerics(rows: pd.DataFrame) -> tuple[pd.DataFrame, list[NumericsSplit]]:
    """``rows`` with each reader that holds rows of several numerics renamed per numerics
    (:func:`reader_label`), and the readers so split. Rows of one numerics per reader come back as they are."""
    if READER not in rows.columns or rows.empty:
        return rows, []
    readers = rows[READER].map(_name)
    numerics = numerics_of(rows)
    splits = [
        NumericsSplit(reader, tuple(counts.items()))
        for reader, counts in _counts(readers, numerics).items()
        if len(counts) > 1
    ]
    if not splits:
        return rows, []
    split = readers.isin({s.reader for s in splits})
    rows = rows.copy()
    rows[READER] = rows[READER].astype(object)
    rows.loc[split, READER] = [reader_label(r, n) for r, n in zip(readers[split], numerics[split], strict=True)]
    return rows, splits


def numerics_splits(rows: pd.DataFrame) -> list[NumericsSplit]:
    """The readers :func:`split_reader_numerics` split in ``rows`` (read back from their labels)."""
    if READER not in rows.columns or rows.empty:
        return []
    labels, numerics = rows[READER].map(_name), numerics_of(rows)
    suffixes = numerics.map(lambda n: f" [{n}]")
    told_apart = pd.Series(
        [label.endswith(suffix) for label, suffix in zip(labels, suffixes, strict=True)], index=rows.index, dtype=bool
    )
    if not told_apart.any():
        return []
    bases = [label[: -len(suffix)] for label, suffix in zip(labels[told_apart], suffixes[told_apart], strict=True)]
    counts = _counts(pd.Series(bases, index=labels[told_apart].index), numerics[told_apart])
    return [NumericsSplit(reader, tuple(c.items())) for reader, c in counts.items() if len(c) > 1]


def numerics_note(splits: Sequence[NumericsSplit]) -> str | None:
    """One line naming each split reader, its numerics and their rows; None when no reader was split."""
    if not splits:
        return None
    parts = [f"{s.reader} as " + ", ".join(f"{numerics} ({n} rows)" for numerics, n in s.counts) for s in splits]
    return (
        f"Reader numerics differ: {'; '.join(parts)}. Each numerics is reported as a reader of its own "
        "(`READER [NUMERICS]`) and contrasts never pair rows across them."
    )
