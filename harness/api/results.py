"""``harness.load_runs`` and ``harness.compare``: the rows and paired contrasts ``python -m harness.report`` reads
and writes, as DataFrames.

:func:`load_runs` reads run and sweep folders as the report does (``harness.report.load``): one row per question
and run, types made uniform across runs, a ``qkey`` question identity and a ``policy`` label naming what varies
between the runs (packer, diversifier, their hyper-parameters, ...). :func:`compare` takes the report's paired
contrasts against a baseline (``harness.report.contrasts``): the frame the report writes to contrasts.csv, with
bootstrap intervals and Holm-adjusted p-values.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pandas as pd

from harness.report import load as report_load
from harness.report.cli import resolve_metric
from harness.report.common import Options, has_values
from harness.report.contrasts import contrast_tables, resolve_baseline

# Where the layout of loaded rows is kept (``DataFrame.attrs``): the setting and policy columns.
LAYOUT_ATTR = "harness.layout"


def load_runs(*folders: str | Path) -> pd.DataFrame:
    """The rows of run and sweep folders as one frame, as ``python -m harness.report FOLDERS`` reads them.

    Besides the rows' own columns (``packer``, ``budget``, every ``cfg.*`` key, the metrics): ``run_dir``, the
    run folder of each row; ``qkey``, the question; ``policy``, a label of the values that vary between runs
    (``packer=submod``). ``rows.attrs["harness.layout"]`` names the setting columns (contrasts are taken within
    each) and the policy columns.
    """
    if not folders:
        raise ValueError("load_runs needs at least one run or sweep folder")
    rows, _ = report_load.load_runs([str(f) for f in folders])
    return _annotated(rows)


def compare(
    rows: pd.DataFrame,
    metric: str | None = None,
    baseline: str | None = None,
    *,
    resamples: int = 10000,
    confidence: float = 0.95,
    seed: int = 0,
) -> pd.DataFrame:
    """The paired contrasts of every policy against the baseline, as ``python -m harness.report`` writes them
    to contrasts.csv (with ``--metric``, ``--baseline``, ``--resamples``, ``--confidence`` and ``--seed``), less
    the ``viewer`` column of addresses the report adds when it writes its evidence viewer.

    One row per (setting, policy, baseline policy): ``mean_a`` (the policy), ``mean_b`` (the baseline),
    ``mean_diff`` with its paired bootstrap interval ``ci_low``..``ci_high``, ``p_value``, ``p_holm`` (Holm over
    all contrasts) and ``n`` questions. ``metric`` defaults as in the report: f1, or without answers
    (read=false) answer_in_context where packers vary, else s_recall. ``baseline``: a value of a varying
    column (``packed``) or ``COLUMN=VALUE``; by default packed, else knn.
    """
    rows = _annotated(rows if "qkey" in rows.columns else report_load.normalise_rows(rows))
    layout = rows.attrs[LAYOUT_ATTR]
    options = Options(baseline=baseline, n_resamples=resamples, confidence=confidence, seed=seed)
    options = resolve_metric(rows, dataclasses.replace(options, metric=metric) if metric else options)
    if not has_values(rows, options.metric):
        numeric = sorted(c for c in rows.columns if pd.api.types.is_numeric_dtype(rows[c]) and not c.startswith("cfg."))
        raise ValueError(f"metric {options.metric!r} is not a numeric column of the rows (numeric: {numeric})")
    if not layout.policy:
        raise ValueError("the rows hold one policy: nothing varies between their runs to compare")
    resolved = resolve_baseline(rows, layout, baseline)
    if resolved is None:
        raise ValueError(
            "no default baseline (packed, knn) among the policies: name one, e.g. baseline='packer=submod'"
        )
    _, data = contrast_tables(rows, layout, options, resolved)
    return data if data is not None else pd.DataFrame()


def _annotated(rows: pd.DataFrame) -> pd.DataFrame:
    """The rows with their ``policy`` labels and their layout in ``attrs`` (as the report annotates them)."""
    rows, layout = report_load.annotate(rows)
    rows.attrs[LAYOUT_ATTR] = layout
    return rows
