"""The report's sections 0, 1, 4 and 6 as tables (validity, sections 2 and 3, is in
``harness.report.validity``; the contrasts, section 5, in ``harness.report.contrasts``; the diversity study in
``harness.report.diversity``): each a numeric frame (written as CSV) and a formatted one (markdown and terminal,
``harness.report.formatting``). A section whose columns or variation are absent from the rows yields no table.
The order the sections appear in is ``harness.report.sections``.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from harness.metrics.mmr import DEFAULT_LAMBDA
from harness.metrics.registry import ALL_GOLD_AT_K, ANSWER_IN_CONTEXT, CONTEXT_TOKENS
from harness.report.common import (
    DEFAULT_BASELINES,
    DIAGNOSTICS,
    OUTCOMES,
    POLICY_METRICS,
    Options,
    Report,
    StudyResult,
    display_keys,
    has_values,
    iter_groups,
)
from harness.report.formatting import ReportTable, fixed, fmt, fmt_ci, heading
from harness.report.load import Layout, RunInfo, format_value, policy_components, short_name
from harness.report.run_sources import SHORT, machine_words
from harness.report.validity import diagnostic_tables, incremental_validity_table
from harness.stats.analyses import oracle_headroom
from harness.stats.bootstrap import grouped_clustered_mean_ci

# Names the report's modules and callers import from here.
__all__ = [
    "DEFAULT_BASELINES",
    "DIAGNOSTICS",
    "MMR_LAMBDA_COLUMNS",
    "OUTCOMES",
    "POLICY_METRICS",
    "Options",
    "Report",
    "StudyResult",
    "diagnostic_tables",
    "has_values",
    "incremental_validity_table",
    "inputs_table",
    "iter_groups",
    "mmr_footnote",
    "oracle_table",
    "policy_table",
    "retrieval_perfect_table",
]

log = logging.getLogger(__name__)


# ----------------------------------------------------------------------------------------------------------
# 0. inputs


def inputs_table(infos: Sequence[RunInfo], rows: pd.DataFrame) -> ReportTable:
    """The runs loaded, each with the data files it read (name and sha256) and the machine it ran on, where its
    summary.json records them (``harness.report.run_sources``)."""
    records = []
    for info in infos:
        mine = rows[rows["run_dir"] == str(info.path)]
        policies = ", ".join(str(p) for p in mine["policy"].unique()) if len(mine) else "–"
        records.append(
            {
                "run_dir": str(info.path),
                "rows": info.n_rows,
                "questions": int(mine["qkey"].nunique()),
                "policy": policies,
                "summary_json": info.summary is not None,
                "data": _files_words(info, digits=None),
                "machine": machine_words((info.summary or {}).get("machine")) or "–",
            }
        )
    data = pd.DataFrame(records)
    display = data.assign(
        rows=data["rows"].map(fmt),
        questions=data["questions"].map(fmt),
        summary_json=data["summary_json"].map(lambda v: "yes" if v else "missing"),
        data=[_files_words(info, digits=SHORT) for info in infos],
    )
    return ReportTable("runs", "Runs loaded", data, display)


def _files_words(info: RunInfo, digits: int | None) -> str:
    """``name sha256`` of each file the run read (the digest cut to ``digits`` hex digits), else "–"."""
    files = ((info.summary or {}).get("data") or {}).get("files") or []
    words = [f"{Path(str(f.get('path'))).name} {str(f.get('sha256') or 'missing')[:digits]}" for f in files]
    return ", ".join(words) or "–"


# ----------------------------------------------------------------------------------------------------------
# 1. policy table


def policy_table(rows: pd.DataFrame, layout: Layout, options: Options) -> ReportTable | None:
    metrics = [m for m in POLICY_METRICS if has_values(rows, m)]
    if not metrics:
        return None
    keys = [*layout.settings, "policy"]
    summary = grouped_clustered_mean_ci(
        rows, metrics, "qkey", keys, options.n_resamples, options.confidence, options.seed
    )
    grouped = rows.groupby(keys, sort=True, observed=True, dropna=False)
    sizes = pd.DataFrame(
        {
            "n_questions": grouped["qkey"].nunique(),
            "n_seeds": grouped["seed"].nunique() if "seed" in rows.columns else 1,
            "n_rows": grouped.size(),
        }
    ).reset_index()
    components = policy_components(rows, layout).reset_index()
    data = summary.merge(sizes, on=keys).merge(components, on="policy", how="left")
    data = data[
        [*keys, *components.columns.drop("policy"), "n_questions", "n_seeds", "n_rows", *summary.columns.drop(keys)]
    ]
    label_columns = list(layout.policy) or ["policy"]
    shown = pd.DataFrame(
        {
            **{short_name(k): data[k].map(format_value) for k in layout.settings},
            **{short_name(c): data[c].map(format_value) for c in label_columns},
            "n": data["n_questions"].map(fmt),
            **{
                heading(m): [
                    fmt_ci(r[m], r[f"{m}_ci_low"], r[f"{m}_ci_high"], digits=1 if m == CONTEXT_TOKENS else 3)
                    for _, r in data.iterrows()
                ]
                for m in metrics
            },
        }
    )
    data["policy"] = data["policy"].astype(str)
    note = (
        f"Means pooled over seeds; {options.confidence:.0%} percentile intervals from a bootstrap that "
        f"resamples questions ({options.n_resamples} resamples). n = questions."
    )
    return ReportTable("policy_table", "Policies by budget", data, shown, note)


# ----------------------------------------------------------------------------------------------------------
# 4. retrieval-perfect subset


def retrieval_perfect_table(rows: pd.DataFrame, layout: Layout, options: Options) -> ReportTable | None:
    if not (has_values(rows, ALL_GOLD_AT_K) and has_values(rows, ANSWER_IN_CONTEXT)):
        return None
    perfect = rows[(rows[ALL_GOLD_AT_K] == 1) & rows[ANSWER_IN_CONTEXT].notna()]
    if perfect.empty:
        return None
    outcomes = [o for o in OUTCOMES if has_values(rows, o)]
    perfect = perfect.assign(dropped=(perfect[ANSWER_IN_CONTEXT] == 0).astype(float))
    several = perfect["policy"].nunique() > 1 or any(perfect[k].nunique() > 1 for k in layout.settings)
    # Score columns masked to NaN outside their answer-in / answer-dropped subset, so one question-clustered
    # bootstrap gives every conditional mean (a ratio over the drawn questions' rows).
    split_columns = {}
    for outcome in outcomes:
        for flag, name in ((1.0, "in"), (0.0, "dropped")):
            split_columns[f"{outcome}_answer_{name}"] = perfect[outcome].where(perfect[ANSWER_IN_CONTEXT] == flag)
    perfect = perfect.assign(**split_columns)
    measured = ["dropped", *split_columns]
    boot = (options.n_resamples, options.confidence, options.seed)
    summaries = [
        grouped_clustered_mean_ci(perfect, measured, "qkey", (), *boot).assign(
            policy="all policies", n_rows=len(perfect), **{k: "all" for k in layout.settings}
        )
    ]
    if several:
        keys = [*layout.settings, "policy"]
        sizes = perfect.groupby(keys, sort=True, observed=True, dropna=False).size().rename("n_rows").reset_index()
        summaries.append(grouped_clustered_mean_ci(perfect, measured, "qkey", keys, *boot).merge(sizes, on=keys))
    data = pd.concat(summaries, ignore_index=True)
    data["policy"] = data["policy"].astype(str)
    data = data.rename(
        columns={
            "dropped": "share_dropped",
            "dropped_ci_low": "share_dropped_ci_low",
            "dropped_ci_high": "share_dropped_ci_high",
        }
    )
    data = data[
        [
            *layout.settings,
            "policy",
            "n_rows",
            *[c for c in data.columns if c not in (*layout.settings, "policy", "n_rows")],
        ]
    ]

    def interval(row: pd.Series, column: str) -> str:
        return fmt_ci(row[column], row[f"{column}_ci_low"], row[f"{column}_ci_high"])

    shown = pd.DataFrame(
        {
            **{short_name(k): data[k].map(format_value) for k in layout.settings},
            "policy": data["policy"],
            "rows": data["n_rows"].map(fmt),
            "answer dropped": [interval(r, "share_dropped") for _, r in data.iterrows()],
            **{
                f"{heading(c.split('_answer_')[0])} | answer {c.split('_answer_')[1]}": [
                    interval(r, c) for _, r in data.iterrows()
                ]
                for c in split_columns
            },
        }
    )
    note = (
        "Rows whose retrieval found every gold document (all-gold@k = 1); 'answer dropped' is the share "
        "whose packed context lost the answer string."
    )
    return ReportTable("retrieval_perfect", "Retrieval-perfect subset", data, shown, note)


# ----------------------------------------------------------------------------------------------------------
# 6. oracle headroom


def oracle_table(rows: pd.DataFrame, layout: Layout, options: Options) -> ReportTable | None:
    metric = options.metric
    if not has_values(rows, metric) or not layout.context:
        return None
    records, shown = [], []
    for keys, group in iter_groups(rows, [*layout.settings, *layout.conditions]):
        scores = group.groupby(["qkey", "policy"], observed=True)[metric].mean().unstack("policy")
        if scores.shape[1] < 2 or scores.dropna().empty:
            continue
        result = oracle_headroom(scores, options.n_resamples, options.confidence, options.seed)
        records.append({**keys, **result, "best_policy": str(result["best_policy"])})
        shown.append(
            {
                **display_keys(keys),
                "policies": fmt(result["n_policies"]),
                "best single policy": str(result["best_policy"]),
                f"best {heading(metric)}": fmt(result["best_mean"]),
                f"oracle {heading(metric)}": fmt(result["oracle_mean"]),
                "headroom [CI]": fmt_ci(result["headroom"], result["ci_low"], result["ci_high"]),
                "questions improved": fmt(result["share_improved"]),
                "n": fmt(result["n"]),
            }
        )
    if not records:
        return None
    note = (
        "Headroom only, not a method: the oracle picks each question's best policy after seeing its score. "
        "Questions present under every policy; interval from a paired bootstrap over questions."
    )
    return ReportTable(
        "oracle_headroom",
        f"Oracle headroom over the best single policy ({heading(metric)})",
        pd.DataFrame(records),
        pd.DataFrame(shown),
        note,
    )


# ----------------------------------------------------------------------------------------------------------
# footnotes

# Where each MMR stage keeps its lambda: (component column, its value for MMR, the lambda's config column).
MMR_LAMBDA_COLUMNS = (
    ("diversifier", "mmr", "cfg.diversifier.lambda_"),
    ("diversifier", "rule", "cfg.diversifier.inner.lambda_"),
    ("packer", "mmr", "cfg.packer.relevance_weight"),
)


def mmr_footnote(rows: pd.DataFrame) -> str:
    """The MMR lambda(s) behind these rows, one clause per MMR stage present; "" when no stage is MMR.

    MMR results move by several points with lambda (0.5 vs 0.7 on clean pools), so every table states it.
    """
    clauses = []
    for component, value, column in MMR_LAMBDA_COLUMNS:
        if component not in rows.columns or column not in rows.columns:
            continue
        lambdas = pd.to_numeric(rows.loc[rows[component].astype(str) == value, column], errors="coerce").dropna()
        if lambdas.empty:
            continue
        shown = ", ".join(fixed(v, 2).rstrip("0").rstrip(".") for v in sorted(lambdas.unique()))
        where = "rule's inner MMR" if value == "rule" else f"{component}={value}"
        clauses.append(f"{where} λ = {shown}")
    if not clauses:
        return ""
    return f"MMR λ: {'; '.join(clauses)} (harness default {DEFAULT_LAMBDA}: 1 = relevance only)."
