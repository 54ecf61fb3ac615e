"""The report's sections 0-6 as tables (the diversity study is in ``harness.report.diversity``): each a
numeric frame (written as CSV) and a formatted one (markdown and terminal, ``harness.report.formatting``).
A section whose columns or variation are absent from the rows yields no table.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field

import pandas as pd

from harness.metrics.registry import (
    ALL_GOLD_AT_K,
    ANSWER_IN_CONTEXT,
    CONTEXT_TOKENS,
    EM,
    F1,
    RECALL_AT_K,
    metric_names,
)
from harness.report.formatting import ReportTable, fixed, fmt, fmt_ci, fmt_p, heading
from harness.report.load import (
    Layout,
    RunInfo,
    format_value,
    policy_components,
    short_name,
    varies,
)
from harness.stats.analyses import (
    diagnostic_correlations,
    incremental_validity,
    oracle_headroom,
)
from harness.stats.bootstrap import clustered_mean_ci, grouped_clustered_mean_ci
from harness.stats.protocol import DiversityStudy

log = logging.getLogger(__name__)

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


# ----------------------------------------------------------------------------------------------------------
# helpers


def _ci_columns(prefix: str, values: tuple[float, float, float]) -> dict[str, float]:
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


def _display_keys(keys: dict) -> dict[str, str]:
    return {short_name(k): format_value(v) for k, v in keys.items()}


# ----------------------------------------------------------------------------------------------------------
# 0. inputs


def inputs_table(infos: Sequence[RunInfo], rows: pd.DataFrame) -> ReportTable:
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
            }
        )
    data = pd.DataFrame(records)
    display = data.assign(
        rows=data["rows"].map(fmt),
        questions=data["questions"].map(fmt),
        summary_json=data["summary_json"].map(lambda v: "yes" if v else "missing"),
    )
    return ReportTable("runs", "Runs loaded", data, display)


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
# 2. diagnostic validity


def diagnostic_tables(rows: pd.DataFrame, options: Options) -> list[ReportTable]:
    outcomes = [o for o in OUTCOMES if has_values(rows, o)]
    diagnostics = [d for d in DIAGNOSTICS if has_values(rows, d) and varies(rows[d].dropna())]
    if not outcomes or not diagnostics:
        return []
    long = diagnostic_correlations(rows, diagnostics, outcomes)
    wide = long.pivot(index="diagnostic", columns="outcome", values=["pearson", "spearman"])
    wide.columns = [f"{stat}_{outcome}" for stat, outcome in wide.columns]
    wide = wide.reindex(diagnostics).reset_index()
    wide["n"] = long.groupby("diagnostic")["n"].min().reindex(diagnostics).to_numpy()
    display = pd.DataFrame({"diagnostic": wide["diagnostic"].map(heading)})
    for outcome in outcomes:
        display[f"Pearson {heading(outcome)}"] = wide[f"pearson_{outcome}"].map(fmt)
        display[f"Spearman {heading(outcome)}"] = wide[f"spearman_{outcome}"].map(fmt)
    display["n"] = wide["n"].map(fmt)
    tables = [
        ReportTable(
            "diagnostic_validity",
            "Diagnostic validity: correlation with reader scores",
            wide,
            display,
            "Pooled over policy x question x seed rows.",
        )
    ]

    if has_values(rows, ANSWER_IN_CONTEXT) and rows[ANSWER_IN_CONTEXT].dropna().isin([0, 1]).all():
        records, shown = [], []
        for flag in (1.0, 0.0):
            subset = rows[rows[ANSWER_IN_CONTEXT] == flag]
            summary = clustered_mean_ci(subset, outcomes, "qkey", options.n_resamples, options.confidence, options.seed)
            record = {
                ANSWER_IN_CONTEXT: int(flag),
                "n_rows": len(subset),
                "share_of_rows": len(subset) / rows[ANSWER_IN_CONTEXT].notna().sum(),
            }
            for outcome in outcomes:
                record.update(_ci_columns(outcome, summary[outcome]))
            records.append(record)
            shown.append(
                {
                    "answer in context": "yes" if flag else "no",
                    "rows": fmt(len(subset)),
                    "share": fmt(record["share_of_rows"]),
                    **{f"mean {heading(o)}": fmt_ci(*summary[o]) for o in outcomes},
                }
            )
        tables.append(
            ReportTable(
                "score_by_answer_in_context",
                "Reader scores when the answer is / is not in the context",
                pd.DataFrame(records),
                pd.DataFrame(shown),
                "Intervals resample questions.",
            )
        )
    return tables


# ----------------------------------------------------------------------------------------------------------
# 3. incremental validity


def incremental_validity_table(rows: pd.DataFrame, options: Options) -> ReportTable | None:
    needed = (options.metric, RECALL_AT_K, ANSWER_IN_CONTEXT)
    # What answer-in-context adds over recall@k in explaining one of the two themselves says nothing.
    if options.metric in (RECALL_AT_K, ANSWER_IN_CONTEXT) or not all(has_values(rows, c) for c in needed):
        return None
    complete = rows.dropna(subset=list(needed))
    if len(complete) < 4 or not all(varies(complete[c]) for c in needed):
        return None
    result = incremental_validity(
        rows,
        outcome=options.metric,
        base=RECALL_AT_K,
        added=ANSWER_IN_CONTEXT,
        cluster="qkey",
        n_resamples=options.n_resamples,
        confidence=options.confidence,
        seed=options.seed,
    )
    m = heading(options.metric)
    shown = [
        (f"R² ({m} ~ recall@k)", fmt(result["r2_base"])),
        (f"R² ({m} ~ recall@k + answer in ctx)", fmt(result["r2_full"])),
        ("ΔR² [CI]", fmt_ci(result["delta_r2"], result["delta_r2_ci_low"], result["delta_r2_ci_high"])),
        ("ΔR² bootstrap p", fmt_p(result["delta_r2_p_value"])),
        ("std. β recall@k [CI]", fmt_ci(result["beta_base"], result["beta_base_ci_low"], result["beta_base_ci_high"])),
        (
            "std. β answer in ctx [CI]",
            fmt_ci(result["beta_added"], result["beta_added_ci_low"], result["beta_added_ci_high"]),
        ),
        (
            f"partial corr(answer in ctx, {m} | recall@k) [CI]",
            fmt_ci(result["partial_corr"], result["partial_corr_ci_low"], result["partial_corr_ci_high"]),
        ),
        ("corr(answer in ctx, recall@k)", fmt(result["corr_added_base"])),
        ("rows / questions", f"{result['n_rows']} / {result['n_clusters']}"),
    ]
    note = (
        "OLS (statsmodels). ΔR² and partial-correlation intervals: question-clustered bootstrap "
        f"({result['n_resamples_used']} usable resamples); β intervals: question-clustered robust errors."
    )
    return ReportTable(
        "incremental_validity",
        f"Incremental validity of answer-in-context over recall@k ({m})",
        pd.DataFrame([{"outcome": options.metric, **result}]),
        pd.DataFrame(shown, columns=["quantity", "value"]),
        note,
    )


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
                **_display_keys(keys),
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
    from harness.diversify.mmr import DEFAULT_LAMBDA

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
