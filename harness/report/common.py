"""What the report's sections share: the options of a report, the report itself (its tables and the data its
plots draw from), the metric groups the sections read, and the small row helpers they use.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import pandas as pd

from harness.metrics.registry import EM, F1, metric_names
from harness.report.formatting import ReportTable
from harness.report.load import Layout, format_value, short_name
from harness.stats.protocol import DiversityStudy

POLICY_METRICS = metric_names(policy_table=True)
DIAGNOSTICS = metric_names(diagnostic=True)
# The reader scores that diagnostics are validated against and subsets are scored by.
OUTCOMES = (F1, EM)
DEFAULT_BASELINES = ("packed", "knn")


@dataclass(frozen=True)
class Options:
    metric: str = F1
    baseline: str | None = None
    n_resamples: int = 10000
    study_resamples: int = 1999
    confidence: float = 0.95
    seed: int = 0
    val_fraction: float = 0.2
    reference: str = "knn"


@dataclass
class StudyResult:
    label: str  # which stratum / perturbation family
    level_name: str  # e.g. 'rho'
    study: DiversityStudy


@dataclass
class Report:
    tables: list[ReportTable] = field(default_factory=list)
    policy_data: pd.DataFrame | None = None
    contrast_data: pd.DataFrame | None = None
    studies: list[StudyResult] = field(default_factory=list)
    layout: Layout | None = None
    scoring: list[str] = field(default_factory=list)  # how answers were scored (harness.report.scoring)
    # Lines said before anything else: readers told apart by their numerics (harness.report.numerics).
    notes: list[str] = field(default_factory=list)


def ci_columns(prefix: str, values: tuple[float, float, float]) -> dict[str, float]:
    mean, low, high = values
    return {prefix: mean, f"{prefix}_ci_low": low, f"{prefix}_ci_high": high}


def has_values(rows: pd.DataFrame, column: str) -> bool:
    return column in rows.columns and pd.api.types.is_numeric_dtype(rows[column]) and rows[column].notna().any()


def iter_groups(rows: pd.DataFrame, keys: Sequence[str]):
    """groupby over keys (possibly none), yielding (dict of key values, group)."""
    keys = list(keys)
    if not keys:
        yield {}, rows
        return
    for values, group in rows.groupby(keys, sort=True, observed=True, dropna=False):
        values = values if isinstance(values, tuple) else (values,)
        yield dict(zip(keys, values, strict=False)), group


def display_keys(keys: dict) -> dict[str, str]:
    return {short_name(k): format_value(v) for k, v in keys.items()}
