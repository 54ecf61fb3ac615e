"""Section 7 of the report: the diversity study (``harness.stats.protocol``) as tables.

Methods are the diversifiers, operating points their varying ``cfg.diversifier.*`` values, levels the
perturbation strength (``cfg.perturb.rho`` or ``cfg.perturb.overlap``; unperturbed rows are level 0). The
study runs per stratum of what a diversifier selects from (dataset, retriever, tree, k) and per
perturbation family, on selection metrics only, so rows that differ just in budget, packer or reader
collapse to one.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from harness.metrics.registry import POOL_REDUNDANCY, RULE_TRIGGERED, S_RECALL
from harness.report.common import Options, StudyResult, has_values, iter_groups
from harness.report.formatting import ReportTable, fmt, fmt_ci, fmt_p
from harness.report.load import Layout, format_value, short_name
from harness.stats.protocol import diversity_study, format_parameter, operating_points

# Perturbation strength columns, in the order they are looked for.
LEVEL_COLUMNS = ("cfg.perturb.rho", "cfg.perturb.overlap")
# Columns that change what a diversifier is given to select from; the study is run per value of these.
SELECTION_COLUMNS = ("dataset", "retriever", "tree", "k")
SELECTION_CFG_PREFIXES = ("cfg.retriever.", "cfg.tree.", "cfg.dataset.")


def _perturbation_families(rows: pd.DataFrame) -> list[tuple[str, str, pd.DataFrame]]:
    """(family label, level name, rows with a numeric ``level`` column) per perturbation family.

    Unperturbed rows (perturb=none) join a family as its level 0 when the family has no level 0 itself.
    """
    level_columns = [c for c in LEVEL_COLUMNS if c in rows.columns and rows[c].notna().any()]
    perturb = rows["perturb"].map(format_value) if "perturb" in rows.columns else pd.Series("none", index=rows.index)
    clean = rows[perturb.isin(["none", "-"])]
    families = []
    for family in sorted(set(perturb) - {"none", "-"}):
        members = rows[perturb == family]
        column = next((c for c in level_columns if members[c].notna().any()), None)
        if column is None:
            families.append((family, "level", members.assign(level=0.0)))
            continue
        leveled = members.assign(level=pd.to_numeric(members[column], errors="coerce"))
        if not clean.empty and not (leveled["level"] == 0).any():
            leveled = pd.concat([clean.assign(level=0.0), leveled], ignore_index=True)
        families.append((family, column.rsplit(".", 1)[-1], leveled))
    if not families and not clean.empty:
        families.append(("none", "level", clean.assign(level=0.0)))
    return families


def _study_scores(rows: pd.DataFrame, layout: Layout) -> pd.DataFrame:
    parameters = [c for c in layout.policy if c.startswith("cfg.diversifier.")]
    scores = pd.DataFrame(
        {
            "method": rows["diversifier"].astype(str),
            "point": operating_points(rows, "diversifier", parameters),
            "level": rows["level"].astype(float),
            "question": rows["qkey"],
            "seed": rows["seed"] if "seed" in rows.columns else 0,
            "value": rows[S_RECALL].astype(float),
            "pool_redundancy": rows[POOL_REDUNDANCY] if POOL_REDUNDANCY in rows.columns else np.nan,
            "rule_triggered": rows[RULE_TRIGGERED] if RULE_TRIGGERED in rows.columns else np.nan,
        }
    )
    # Selection happens before packing and reading: rows that differ only in budget, packer or reader
    # repeat the same selection, so they collapse to one.
    keys = ["method", "point", "level", "question", "seed"]
    return scores.groupby(keys, as_index=False, sort=True)[["value", "pool_redundancy", "rule_triggered"]].mean()


def _selection_strata(layout: Layout) -> list[str]:
    return [
        c for c in (*layout.settings, *layout.policy) if c in SELECTION_COLUMNS or c.startswith(SELECTION_CFG_PREFIXES)
    ]


def diversity_tables(
    rows: pd.DataFrame, layout: Layout, options: Options
) -> tuple[list[ReportTable], list[StudyResult]]:
    if not has_values(rows, S_RECALL) or "diversifier" not in rows.columns:
        return [], []
    if options.reference not in set(rows["diversifier"].astype(str)) or rows["diversifier"].nunique() < 2:
        return [], []
    studies: list[StudyResult] = []
    for keys, stratum in iter_groups(rows, _selection_strata(layout)):
        for family, level_name, family_rows in _perturbation_families(stratum):
            scores = _study_scores(family_rows, layout)
            if scores["question"].nunique() < 2 or scores["method"].nunique() < 2:
                continue
            label = ", ".join(
                [
                    *(f"{short_name(k)}={format_value(v)}" for k, v in keys.items()),
                    *([f"perturb={family}"] if family != "none" else []),
                ]
            )
            study = diversity_study(
                scores,
                reference=options.reference,
                val_fraction=options.val_fraction,
                n_resamples=options.study_resamples,
                confidence=options.confidence,
                seed=options.seed,
                redundancy_column="pool_redundancy",
                trigger_column="rule_triggered",
            )
            studies.append(StudyResult(label, level_name, study))
    if not studies:
        return [], []
    parts: dict[str, list[tuple[pd.DataFrame, pd.DataFrame]]] = {}
    for result in studies:
        for name, (data, display) in _study_tables(result).items():
            prefix = {"study": result.label} if len(studies) > 1 and result.label else {}
            parts.setdefault(name, []).append((data.assign(**prefix), display.assign(**prefix)))
    reference, pct = options.reference, f"{options.confidence:.0%}"
    titles = {
        "diversity_operating_points": (
            "Diversity study: operating points tuned on validation S-Recall",
            (
                f"Validation: {options.val_fraction:.0%} of questions (seed {options.seed}); score = mean over levels "
                "of mean validation S-Recall; ✓ = chosen."
            ),
        ),
        "diversity_s_recall": (
            "Diversity study: test S-Recall per method and perturbation level",
            f"Test questions only, each method at its tuned point; {pct} bootstrap intervals over queries.",
        ),
        "diversity_oracles": (
            "Diversity study: per-query oracles (test)",
            (
                "Oracle = each query's best operating point (per method) or best method and point (all methods); "
                f"'improved' = share of queries where it beats {reference}."
            ),
        ),
        "diversity_robustness": (
            "Diversity study: misspecification downside and minimax regret (test)",
            (
                f"Downside = largest loss against {reference} over levels; regret = best method at the level minus "
                "the method; ✓ = minimax-regret choice."
            ),
        ),
        "diversity_contrasts": (
            f"Diversity study: method − {reference} per level (test)",
            (
                f"Query-clustered bootstrap (seeds averaged within a query, {options.study_resamples} resamples); "
                "Holm over all per-level contrasts and, separately, over the heavy−clean interactions "
                "(the primary test)."
            ),
        ),
    }
    tables = []
    for name, (title, note) in titles.items():
        if name in parts:
            data = pd.concat([d for d, _ in parts[name]], ignore_index=True)
            display = pd.concat([s for _, s in parts[name]], ignore_index=True)
            if "study" in display.columns:
                display = display[["study", *[c for c in display.columns if c != "study"]]]
            tables.append(ReportTable(name, title, data, display, note))
    return tables, studies


def _method_label(method: str, point: str) -> str:
    return method if point == "default" else f"{method} ({point})"


def _study_tables(result: StudyResult) -> dict[str, tuple[pd.DataFrame, pd.DataFrame]]:
    study, level_name = result.study, result.level_name
    chosen = study.chosen

    def level_label(level: Any) -> str:
        return f"{level_name}={format_parameter(level)}" if not isinstance(level, str) else level

    out = {}
    tuning = study.tuning
    out["diversity_operating_points"] = (
        tuning,
        pd.DataFrame(
            {
                "method": tuning["method"],
                "operating point": tuning["point"],
                "validation S-Recall": tuning["val_score"].map(fmt),
                "n val": tuning["n_val_queries"].map(fmt),
                "chosen": tuning["chosen"].map(lambda c: "✓" if c else ""),
            }
        ),
    )

    means = study.means
    levels = sorted(means["level"].unique())
    methods = [study.reference] + sorted(m for m in means["method"].unique() if m != study.reference)
    data_rows, shown_rows = [], []
    for method in methods:
        mine = means[means["method"] == method].set_index("level")
        label = _method_label(method, chosen.get(method, "default"))
        data_rows.append(
            {"row": label, **{level_label(lv): mine.loc[lv, "mean"] if lv in mine.index else np.nan for lv in levels}}
        )
        shown_rows.append(
            {
                "": label,
                **{
                    level_label(lv): fmt_ci(*mine.loc[lv, ["mean", "ci_low", "ci_high"]]) if lv in mine.index else "–"
                    for lv in levels
                },
            }
        )
    if study.redundancy is not None:
        data_rows.append(
            {"row": "measured redundancy", **{level_label(lv): study.redundancy.get(lv, np.nan) for lv in levels}}
        )
        shown_rows.append(
            {
                "": "measured redundancy (pool)",
                **{level_label(lv): fmt(study.redundancy.get(lv, np.nan)) for lv in levels},
            }
        )
    for method, rates in study.trigger_rate.iterrows():
        data_rows.append({"row": f"{method} trigger rate", **{level_label(lv): rates.get(lv, np.nan) for lv in levels}})
        shown_rows.append(
            {"": f"{method} trigger rate", **{level_label(lv): fmt(rates.get(lv, np.nan)) for lv in levels}}
        )
    out["diversity_s_recall"] = (pd.DataFrame(data_rows), pd.DataFrame(shown_rows))

    oracles = study.oracles
    out["diversity_oracles"] = (
        oracles,
        pd.DataFrame(
            {
                "level": oracles["level"].map(level_label),
                "method": oracles["method"],
                "tuned": oracles["tuned_mean"].map(fmt),
                "oracle": oracles["oracle_mean"].map(fmt),
                study.reference: oracles["reference_mean"].map(fmt),
                "improved": oracles["share_improved"].map(fmt),
                "n": oracles["n"].map(fmt),
            }
        ),
    )

    if study.regret is not None and study.downside is not None:
        robust = study.regret.merge(study.downside, on="method", how="left")
        robust["worst_level"] = robust["worst_level"].map(lambda v: v if pd.isna(v) else float(v))
        shown = pd.DataFrame({"method": robust["method"].map(lambda m: _method_label(m, chosen.get(m, "default")))})
        for column in [c for c in robust.columns if c.startswith("regret@")]:
            shown[f"regret {level_label(float(column.split('@', 1)[1]))}"] = robust[column].map(fmt)
        shown["max regret"] = robust["max_regret"].map(fmt)
        shown["minimax"] = robust["minimax"].map(lambda c: "✓" if c else "")
        shown[f"downside vs {study.reference}"] = robust["downside"].map(fmt)
        shown["worst level"] = robust["worst_level"].map(lambda v: "–" if pd.isna(v) else level_label(v))
        shown["loss at heaviest"] = robust["loss_at_heaviest"].map(fmt)
        out["diversity_robustness"] = (robust, shown)

    contrasts = study.contrasts
    if not contrasts.empty:
        out["diversity_contrasts"] = (
            contrasts,
            pd.DataFrame(
                {
                    "method": contrasts["method"].map(lambda m: _method_label(m, chosen.get(m, "default"))),
                    "level": [
                        ("heavy − clean (primary)" if k == "interaction" else level_label(lv))
                        for lv, k in zip(contrasts["level"], contrasts["kind"], strict=False)
                    ],
                    f"Δ S-Recall vs {study.reference} [CI]": [
                        fmt_ci(r.mean_diff, r.ci_low, r.ci_high) for r in contrasts.itertuples()
                    ],
                    "p": contrasts["p_value"].map(fmt_p),
                    "p (Holm)": contrasts["p_holm"].map(fmt_p),
                    "n": contrasts["n"].map(fmt),
                }
            ),
        )
    return out
