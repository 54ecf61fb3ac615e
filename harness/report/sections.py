"""The report's sections, registered in one list: ``build_report`` (``harness.report.cli``) builds every
registered section that applies to the rows, in order, and writes their tables one after another.

A section is a name, a function that builds its tables from the rows, their layout and the report's options
(``SectionInputs``), a test of whether it applies to the rows at all, and a position. The built-in sections
register below in the order the report has always shown them; code outside the package adds one with
``register_section`` (imported before the report is built) and places it with ``order`` between them
(the built-ins sit at 0, 10, ..., 90). A section that finds nothing to show in the rows returns no table, so
``applies`` is only a shortcut for a section that can tell from the columns alone.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from harness.report.common import Options, Report
from harness.report.contrasts import contrast_tables
from harness.report.diversity import diversity_tables
from harness.report.formatting import ReportTable
from harness.report.load import Layout, RunInfo
from harness.report.longform import longform_tables
from harness.report.tables import inputs_table, oracle_table, policy_table, retrieval_perfect_table
from harness.report.trees import tree_tables
from harness.report.validity import diagnostic_tables, incremental_validity_table


@dataclass(frozen=True)
class SectionInputs:
    """What a section is built from. ``report`` is the report being built: a section whose tables feed a plot
    keeps that data on it (``policy_data``, ``contrast_data``, ``studies``)."""

    rows: pd.DataFrame
    layout: Layout
    options: Options
    infos: Sequence[RunInfo] = ()
    baseline: tuple[str, Any] | None = None  # the contrasts' baseline (column, value), resolved up front
    report: Report | None = None


Built = ReportTable | Iterable[ReportTable] | None


def always(rows: pd.DataFrame) -> bool:
    return True


@dataclass(frozen=True)
class ReportSection:
    name: str
    build: Callable[[SectionInputs], Built]
    applies: Callable[[pd.DataFrame], bool] = always
    order: float = 0.0


_SECTIONS: list[ReportSection] = []
# Space between consecutive built-in positions, so that a section fits between any two of them.
ORDER_STEP = 10.0


def register_section(
    name: str,
    build: Callable[[SectionInputs], Built],
    applies: Callable[[pd.DataFrame], bool] | None = None,
    order: float | None = None,
) -> ReportSection:
    """Add a section to every report built from now on; ``order`` None places it after the last one. Sections
    with equal ``order`` appear in the order they were registered. A name already registered is an error."""
    if any(section.name == name for section in _SECTIONS):
        raise ValueError(f"report section {name!r} is registered already")
    if order is None:
        order = max((section.order for section in _SECTIONS), default=-ORDER_STEP) + ORDER_STEP
    section = ReportSection(name, build, applies or always, float(order))
    _SECTIONS.append(section)
    _SECTIONS.sort(key=lambda s: s.order)  # stable: ties keep their registration order
    return section


def unregister_section(name: str) -> ReportSection:
    """Remove a registered section (a report built afterwards leaves it out); an unknown name is an error."""
    for i, section in enumerate(_SECTIONS):
        if section.name == name:
            return _SECTIONS.pop(i)
    raise KeyError(f"no report section {name!r} (registered: {', '.join(section_names())})")


def registered_sections() -> tuple[ReportSection, ...]:
    return tuple(_SECTIONS)


def section_names() -> list[str]:
    return [section.name for section in _SECTIONS]


def build_sections(inputs: SectionInputs) -> list[ReportTable]:
    """The tables of every registered section that applies to the rows, in section order."""
    tables: list[ReportTable] = []
    for section in registered_sections():
        if not section.applies(inputs.rows):
            continue
        built = section.build(inputs)
        if built is None:
            continue
        if isinstance(built, ReportTable):
            tables.append(built)
        else:
            tables.extend(built)
    return tables


# ----------------------------------------------------------------------------------------------------------
# the built-in sections, in report order


def _runs(inputs: SectionInputs) -> Built:
    return inputs_table(inputs.infos, inputs.rows)


def _policy(inputs: SectionInputs) -> Built:
    table = policy_table(inputs.rows, inputs.layout, inputs.options)
    if table is not None and inputs.report is not None:
        inputs.report.policy_data = table.data  # the budget curves plot it
    return table


def _diagnostic_validity(inputs: SectionInputs) -> Built:
    return diagnostic_tables(inputs.rows, inputs.options)


def _incremental_validity(inputs: SectionInputs) -> Built:
    return incremental_validity_table(inputs.rows, inputs.options)


def _retrieval_perfect(inputs: SectionInputs) -> Built:
    return retrieval_perfect_table(inputs.rows, inputs.layout, inputs.options)


def _keeping(inputs: SectionInputs, attribute: str, built: tuple[list[ReportTable], Any]) -> Built:
    """The tables of a section that also returns the data a plot draws: that data is kept on the report."""
    tables, data = built
    if inputs.report is not None:
        setattr(inputs.report, attribute, data)
    return tables


def _contrasts(inputs: SectionInputs) -> Built:
    # the reader ladder plots the contrasts
    return _keeping(
        inputs, "contrast_data", contrast_tables(inputs.rows, inputs.layout, inputs.options, inputs.baseline)
    )


def _oracle_headroom(inputs: SectionInputs) -> Built:
    return oracle_table(inputs.rows, inputs.layout, inputs.options)


def _diversity(inputs: SectionInputs) -> Built:
    # one diversity plot per study
    return _keeping(inputs, "studies", diversity_tables(inputs.rows, inputs.layout, inputs.options))


def _trees(inputs: SectionInputs) -> Built:
    return tree_tables(inputs.rows, inputs.layout, inputs.options)


def _longform(inputs: SectionInputs) -> Built:
    return longform_tables(inputs.rows, inputs.layout, inputs.options)


BUILTIN_SECTIONS: tuple[tuple[str, Callable[[SectionInputs], Built]], ...] = (
    ("runs", _runs),
    ("policy", _policy),
    ("diagnostic_validity", _diagnostic_validity),
    ("incremental_validity", _incremental_validity),
    ("retrieval_perfect", _retrieval_perfect),
    ("contrasts", _contrasts),
    ("oracle_headroom", _oracle_headroom),
    ("diversity", _diversity),
    ("trees", _trees),
    ("longform", _longform),
)

for _position, (_name, _build) in enumerate(BUILTIN_SECTIONS):
    register_section(_name, _build, order=_position * ORDER_STEP)
