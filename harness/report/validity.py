"""The report's validity sections: how the diagnostics correlate with the reader scores (section 2) and
what answer-in-context adds over recall@k in explaining them (section 3).
"""

from __future__ import annotations

from typing import Protocol

import pandas as pd

from harness.metrics.registry import ANSWER_IN_CONTEXT, RECALL_AT_K
from harness.report.common import DIAGNOSTICS, OUTCOMES, Options, ci_columns, has_values
from harness.report.formatting import ReportTable, fmt, fmt_ci, fmt_p, heading
from harness.report.load import varies
from harness.stats.analyses import diagnostic_correlations, incremental_validity
from harness.stats.bootstrap import clustered_mean_ci


class Resampling(Protocol):
    """How a bootstrap resamples: the report's ``Options`` and the replication study's ``Settings`` both are."""

    @property
    def n_resamples(self) -> int: ...

    @property
    def confidence(self) -> float: ...

    @property
    def seed(self) -> int: ...


def aic_over_recall(rows: pd.DataFrame, outcome: str, resampling: Resampling) -> dict:
    """What answer-in-context adds over recall@k in explaining ``outcome`` (``incremental_validity``), with
    intervals that resample whole questions."""
    return incremental_validity(
        rows,
        outcome=outcome,
        base=RECALL_AT_K,
        added=ANSWER_IN_CONTEXT,
        cluster="qkey",
        n_resamples=resampling.n_resamples,
        confidence=resampling.confidence,
        seed=resampling.seed,
    )


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
                record.update(ci_columns(outcome, summary[outcome]))
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
    result = aic_over_recall(rows, options.metric, options)
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
