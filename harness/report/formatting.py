"""How report tables look: numbers, intervals and p-values as text, and tables as markdown or on the terminal.

A report table (:class:`ReportTable`) is a numeric frame, written as CSV, beside a formatted one of strings;
everything here works on the formatted side and knows nothing of the analyses behind it.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from harness.metrics import registry
from harness.report.load import short_name

# Missing values are shown as an en dash, never as "nan".
MISSING = "–"


@dataclass
class ReportTable:
    name: str  # file stem of the CSV
    title: str
    data: pd.DataFrame  # numbers, written as CSV
    display: pd.DataFrame  # formatted strings, for markdown and the terminal
    note: str = ""
    footnote: str = ""  # printed under the table (the MMR lambda its rows used)


# ----------------------------------------------------------------------------------------------------------
# cells


def fmt(value: Any, digits: int = 3) -> str:
    if value is None or (isinstance(value, (float, np.floating)) and math.isnan(value)):
        return MISSING
    if isinstance(value, (bool, np.bool_)):
        return "yes" if value else ""
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    if isinstance(value, (float, np.floating)):
        if abs(value) >= 1000:
            return f"{value:.0f}"
        return fixed(value, digits)
    return str(value)


def fixed(value: float, digits: int) -> str:
    """``value`` with ``digits`` decimals, never as '-0.000'."""
    text = f"{value:.{digits}f}"
    return text[1:] if text.startswith("-") and float(text) == 0 else text


def fmt_ci(mean: float, low: float, high: float, digits: int = 3) -> str:
    if isinstance(mean, float) and math.isnan(mean):
        return MISSING
    digits = 1 if abs(mean) >= 100 else digits
    if math.isnan(low) or math.isnan(high):
        return fixed(mean, digits)
    return f"{fixed(mean, digits)} [{fixed(low, digits)}, {fixed(high, digits)}]"


def fmt_p(p: float) -> str:
    if isinstance(p, float) and math.isnan(p):
        return MISSING
    return f"{p:.1e}" if p < 1e-3 else f"{p:.3f}"


def heading(column: str) -> str:
    """A column's label: the registered metric heading, else its short name."""
    return registry.get_metric(column).heading if registry.is_registered(column) else short_name(column)


# A cell written by fmt, fmt_ci or fmt_p from a number: a missing value, a signed decimal or count (with an
# exponent, or a trailing interval), or a "k / n" count pair.
_NUMERIC_CELL = re.compile(rf"^(?:{MISSING}|[-+]?(?:\d+\.?\d*|\.\d+)(?:e[-+]?\d+)?%?(?: \[.*\])?|\d+(?: / \d+)+)$")


def is_numeric_column(cells: pd.Series) -> bool:
    """Whether every cell of a formatted column shows a number, so the column is right-aligned."""
    return bool(len(cells)) and all(_NUMERIC_CELL.match(str(cell)) for cell in cells)


# ----------------------------------------------------------------------------------------------------------
# tables


def _escape(cell: Any) -> str:
    return str(cell).replace("|", "\\|").replace("\n", " ")


def to_markdown(frame: pd.DataFrame) -> str:
    header = [_escape(c) for c in frame.columns]
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    for values in frame.itertuples(index=False):
        lines.append("| " + " | ".join(_escape(v) for v in values) + " |")
    return "\n".join(lines)


def render_markdown(
    tables: Sequence[ReportTable], title: str, preamble: Sequence[str] = (), plots: Sequence[str] = ()
) -> str:
    parts = [f"# {title}", "", *preamble]
    for table in tables:
        parts += ["", f"## {table.title}", ""]
        if table.note:
            parts += [table.note, ""]
        parts += [to_markdown(table.display), ""]
        if table.footnote:
            parts += [table.footnote, ""]
        parts += [f"CSV: `{table.name}.csv`"]
    if plots:
        parts += ["", "## Plots", ""]
        parts += [f"![{name}]({name})" for name in plots]
    return "\n".join(parts) + "\n"


def print_tables(tables: Sequence[ReportTable], console) -> None:
    from rich.table import Table

    for table in tables:
        caption = "\n".join(text for text in (table.note, table.footnote) if text)
        view = Table(title=table.title, caption=caption or None, caption_justify="left")
        for column in table.display.columns:
            view.add_column(
                str(column), justify="right" if is_numeric_column(table.display[column]) else "left", overflow="fold"
            )
        for values in table.display.itertuples(index=False):
            view.add_row(*(str(v) for v in values))
        console.print(view)
