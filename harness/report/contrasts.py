"""Paired contrasts against a baseline policy: which policy is the baseline, which runs pair with it, and the
tables of differences with paired bootstrap intervals and Holm-adjusted p-values."""

from __future__ import annotations

import logging
from typing import Any

import pandas as pd

from harness.metrics.registry import ANSWER_IN_CONTEXT
from harness.report.common import DEFAULT_BASELINES, Options, has_values, iter_groups
from harness.report.formatting import ReportTable, fmt, fmt_ci, fmt_p, heading
from harness.report.load import (
    COMPONENT_COLUMNS,
    Layout,
    format_value,
    policy_components,
    short_name,
)
from harness.stats.analyses import gain_decomposition, holm_adjust, paired_contrast

log = logging.getLogger(__name__)

# ----------------------------------------------------------------------------------------------------------
# 5. paired contrasts


def _values(rows: pd.DataFrame, column: str) -> set[str]:
    return {format_value(v) for v in pd.unique(rows[column])}


def resolve_baseline(rows: pd.DataFrame, layout: Layout, baseline: str | None) -> tuple[str, Any] | None:
    """(column, value) of the baseline. ``NAME`` is looked up in the varying component columns (first match
    in component order); ``COLUMN=NAME`` names the column. With no name, the first default present."""
    components = [c for c in layout.policy if c in COMPONENT_COLUMNS or c.startswith("cfg.")]
    if baseline is None:
        for name in DEFAULT_BASELINES:
            if any(name in _values(rows, c) for c in components):
                return resolve_baseline(rows, layout, name)
        return None
    if "=" in baseline:
        column, value = baseline.split("=", 1)
        column = column if column in rows.columns else f"cfg.{column}"
        if column not in layout.policy:
            raise ValueError(
                f"--baseline {baseline!r}: {column!r} is not a varying policy column "
                f"(varying: {[short_name(c) for c in layout.policy]})"
            )
        candidates = [column]
    else:
        value = baseline
        candidates = [c for c in components if baseline in _values(rows, c)]
        if not candidates:
            values = {short_name(c): sorted(_values(rows, c)) for c in components}
            raise ValueError(f"--baseline {baseline!r} is not a value of any varying policy column {values}")
        if len(candidates) > 1:
            log.warning(
                "baseline %r is a value of %s; using %s (write COLUMN=%s to choose)",
                baseline,
                candidates,
                candidates[0],
                baseline,
            )
    column = candidates[0]
    matches = [v for v in pd.unique(rows[column]) if format_value(v) == value]
    if not matches:
        raise ValueError(f"--baseline {baseline!r}: no rows have {short_name(column)}={value}")
    return column, matches[0]


def baseline_partners(components: pd.DataFrame, column: str, value: Any) -> dict[str, list[str]]:
    """For each non-baseline policy, the baseline policies equal to it in every other policy column.

    The baseline's own hyper-parameters (``cfg.<column>.*``) are not matched: kNN has no lambda_.
    """
    own = f"cfg.{column}."
    matched = [c for c in components.columns if c != column and not c.startswith(own)]
    keys = (
        components[matched].map(format_value).apply(tuple, axis=1)
        if matched
        else pd.Series([()] * len(components), index=components.index)
    )
    is_base = components[column].map(format_value) == format_value(value)
    partners = {}
    for policy in components.index[~is_base]:
        partners[policy] = [b for b in components.index[is_base] if keys[b] == keys[policy]]
    return partners


def contrast_tables(
    rows: pd.DataFrame, layout: Layout, options: Options, resolved: tuple[str, Any] | None = None
) -> tuple[list[ReportTable], pd.DataFrame | None]:
    """Paired contrasts against the baseline (``resolved``: its (column, value), else from the options)."""
    metric = options.metric
    if not has_values(rows, metric) or not layout.policy:
        return [], None
    resolved = resolved or resolve_baseline(rows, layout, options.baseline)
    if resolved is None:
        return [], None
    column, value = resolved
    components = policy_components(rows, layout)
    partners = baseline_partners(components, column, value)
    with_flag = has_values(rows, ANSWER_IN_CONTEXT)
    records, decompositions = [], []
    for keys, group in iter_groups(rows, layout.settings):
        by_policy = {p: g for p, g in group.groupby("policy", observed=True)}
        for policy, bases in partners.items():
            for base in bases:
                if policy not in by_policy or base not in by_policy:
                    continue
                result = paired_contrast(
                    by_policy[policy],
                    by_policy[base],
                    metric,
                    question="qkey",
                    n_resamples=options.n_resamples,
                    confidence=options.confidence,
                    seed=options.seed,
                )
                if result["n"] == 0:
                    continue
                record = {
                    **keys,
                    "policy": str(policy),
                    "baseline": str(base),
                    "baseline_name": f"{short_name(column)}={format_value(value)}",
                    **{f"policy.{c}": components.loc[policy, c] for c in components.columns},
                    **result,
                }
                records.append(record)
                if with_flag:
                    decompositions.append(
                        {
                            **keys,
                            "policy": str(policy),
                            "baseline": str(base),
                            **gain_decomposition(
                                by_policy[policy], by_policy[base], metric, ANSWER_IN_CONTEXT, question="qkey"
                            ),
                        }
                    )
    if not records:
        return [], None
    data = pd.DataFrame(records)
    data["p_holm"] = holm_adjust(data["p_value"].to_numpy(float))
    m = heading(metric)
    display = pd.DataFrame(
        {
            **{short_name(k): data[k].map(format_value) for k in layout.settings},
            "policy": data["policy"],
            "baseline": data["baseline"],
            f"{m} policy": data["mean_a"].map(fmt),
            f"{m} baseline": data["mean_b"].map(fmt),
            f"Δ{m} [CI]": [fmt_ci(r.mean_diff, r.ci_low, r.ci_high) for r in data.itertuples()],
            "p": data["p_value"].map(fmt_p),
            "p (Holm)": data["p_holm"].map(fmt_p),
            "n": data["n"].map(fmt),
        }
    )
    note = (
        f"Baseline {short_name(column)}={format_value(value)}. Pairs matched on question and seed, averaged "
        f"over seeds within a question; paired bootstrap over questions ({options.n_resamples} resamples, "
        f"{options.confidence:.0%} percentile interval); Holm adjustment over all {len(data)} contrasts."
    )
    tables = [ReportTable("contrasts", f"Paired contrasts against the baseline ({m})", data, display, note)]
    if decompositions:
        dec = pd.DataFrame(decompositions)
        dec_display = pd.DataFrame(
            {
                **{short_name(k): dec[k].map(format_value) for k in layout.settings},
                "policy": dec["policy"],
                "baseline": dec["baseline"],
                f"Δ{m}": dec["mean_diff"].map(fmt),
                "from answer entering (0→1)": dec["from_entered"].map(fmt),
                "from answer leaving (1→0)": dec["from_left"].map(fmt),
                "from others": dec["from_others"].map(fmt),
                "entering share of transitions": dec["entered_share"].map(fmt),
                "pairs 0→1 / 1→0 / all": [f"{r.n_entered} / {r.n_left} / {r.n_pairs}" for r in dec.itertuples()],
            }
        )
        tables.append(
            ReportTable(
                "contrast_decomposition",
                f"Where each contrast's {m} gain comes from",
                dec,
                dec_display,
                "Per (question, seed) pair by the answer-in-context transition "
                "baseline → policy; the three parts sum to the contrast. Entering share of transitions: "
                "pairs 0→1 over pairs 0→1 and 1→0.",
            )
        )
    return tables, data
