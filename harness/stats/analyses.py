"""Analyses over per-question result rows: diagnostic validity, incremental validity, paired policy
contrasts with Holm adjustment and their per-question decomposition, and oracle headroom.

Rows are observations of (policy, question, seed). Where two policies are compared, rows are matched on
(question, seed) and the matched differences averaged over seeds within a question, so every question
counts once; resampling is always over questions.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats
from statsmodels.regression.linear_model import OLS
from statsmodels.stats.multitest import multipletests
from statsmodels.tools.tools import add_constant

from harness.metrics.registry import ANSWER_IN_CONTEXT, RECALL_AT_K
from harness.stats.bootstrap import bootstrap_p_value, clustered_bootstrap, paired_bootstrap, percentile_interval


def holm_adjust(p_values: Sequence[float]) -> np.ndarray:
    """Holm step-down adjusted p-values (statsmodels ``multipletests``); NaN entries stay NaN and are not
    counted in the family."""
    p = np.asarray(p_values, dtype=float)
    adjusted = np.full(p.shape, np.nan)
    finite = ~np.isnan(p)
    if finite.any():
        adjusted[finite] = multipletests(p[finite], method="holm")[1]
    return adjusted


def correlations(x: Any, y: Any) -> dict[str, float]:
    """Pearson and Spearman correlation of the pairs where both are present; NaN when either is constant."""
    a = np.asarray(x, dtype=float)
    b = np.asarray(y, dtype=float)
    keep = ~(np.isnan(a) | np.isnan(b))
    a, b = a[keep], b[keep]
    n = int(a.size)
    if n < 3 or np.ptp(a) == 0 or np.ptp(b) == 0:
        return {"pearson": math.nan, "spearman": math.nan, "n": n}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", stats.ConstantInputWarning)
        return {
            "pearson": float(stats.pearsonr(a, b).statistic),
            "spearman": float(stats.spearmanr(a, b).statistic),
            "n": n,
        }


def diagnostic_correlations(
    rows: pd.DataFrame, diagnostics: Sequence[str], outcomes: Sequence[str] = ("f1", "em")
) -> pd.DataFrame:
    """One row per (diagnostic, outcome): Pearson r, Spearman rho and n, pooled over every row given."""
    missing = [c for c in (*diagnostics, *outcomes) if c not in rows.columns]
    if missing:
        raise KeyError(f"columns not in the rows: {missing}")
    records = []
    for diagnostic in diagnostics:
        for outcome in outcomes:
            records.append(
                {"diagnostic": diagnostic, "outcome": outcome, **correlations(rows[diagnostic], rows[outcome])}
            )
    return pd.DataFrame(records, columns=["diagnostic", "outcome", "pearson", "spearman", "n"])


# ----------------------------------------------------------------------------------------------------------
# Incremental validity of a diagnostic over retrieval recall


def _correlations_from_moments(m: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(r_xy, r_zy, r_xz) from columns [E x, E z, E y, E x^2, E z^2, E y^2, E xz, E xy, E zy]."""
    mx, mz, my, xx, zz, yy, xz, xy, zy = (m[..., i] for i in range(9))
    vx, vz, vy = xx - mx * mx, zz - mz * mz, yy - my * my
    with np.errstate(invalid="ignore", divide="ignore"):
        r_xy = (xy - mx * my) / np.sqrt(vx * vy)
        r_zy = (zy - mz * my) / np.sqrt(vz * vy)
        r_xz = (xz - mx * mz) / np.sqrt(vx * vz)
    return r_xy, r_zy, r_xz


def _validity_from_moments(m: np.ndarray) -> dict[str, np.ndarray]:
    """R^2 of y on x, of y on (x, z), and the partial correlation of z with y given x, from raw moments.

    These are the OLS quantities written through correlations, which lets a bootstrap evaluate them for
    every resample at once from resampled column means.
    """
    r_xy, r_zy, r_xz = _correlations_from_moments(m)
    with np.errstate(invalid="ignore", divide="ignore"):
        r2_base = r_xy**2
        r2_full = (r_xy**2 + r_zy**2 - 2.0 * r_xy * r_zy * r_xz) / (1.0 - r_xz**2)
        partial = (r_zy - r_xy * r_xz) / np.sqrt((1.0 - r_xy**2) * (1.0 - r_xz**2))
    return {"r2_base": r2_base, "r2_full": r2_full, "delta_r2": r2_full - r2_base, "partial": partial}


def incremental_validity(
    rows: pd.DataFrame,
    outcome: str = "f1",
    base: str = RECALL_AT_K,
    added: str = ANSWER_IN_CONTEXT,
    cluster: str = "question_id",
    n_resamples: int = 10000,
    confidence: float = 0.95,
    seed: int = 0,
) -> dict[str, float]:
    """How much ``added`` explains of ``outcome`` beyond ``base`` (OLS, statsmodels).

    Returns R^2 of outcome ~ base and of outcome ~ base + added, their difference with a percentile
    interval from a bootstrap that resamples whole ``cluster`` groups (questions), the standardised
    coefficients of the full model with cluster-robust intervals, the partial correlation of ``added``
    with ``outcome`` given ``base`` (with its bootstrap interval) and corr(added, base).
    Rows missing any of the three values are dropped.
    """
    missing = [c for c in (outcome, base, added, cluster) if c not in rows.columns]
    if missing:
        raise KeyError(f"columns not in the rows: {missing}")
    # Unique names: an outcome that is also a predictor must not select its column twice.
    data = rows[list(dict.fromkeys([outcome, base, added, cluster]))].dropna()
    x = data[base].to_numpy(dtype=float)
    z = data[added].to_numpy(dtype=float)
    y = data[outcome].to_numpy(dtype=float)
    for name, values in ((base, x), (added, z), (outcome, y)):
        if values.size < 4 or np.ptp(values) == 0:
            raise ValueError(
                f"incremental validity needs {name!r} to vary over at least 4 rows ({values.size} complete rows)"
            )
    groups = pd.factorize(data[cluster])[0]

    base_fit = OLS(y, add_constant(x)).fit()
    full_fit = OLS(y, add_constant(np.column_stack([x, z]))).fit()

    def standardise(v: np.ndarray) -> np.ndarray:
        return (v - v.mean()) / v.std()

    # Standardised coefficients; question-clustered errors because a question appears under many policies.
    std_fit = OLS(standardise(y), add_constant(np.column_stack([standardise(x), standardise(z)]))).fit(
        cov_type="cluster", cov_kwds={"groups": groups}
    )
    std_ci = np.asarray(std_fit.conf_int(alpha=1.0 - confidence))

    moments = np.column_stack([x, z, y, x * x, z * z, y * y, x * z, x * y, z * y])
    draws = _validity_from_moments(clustered_bootstrap(moments, groups, "mean", n_resamples, seed))
    point = _validity_from_moments(moments.mean(axis=0))
    delta_low, delta_high = percentile_interval(draws["delta_r2"], confidence)
    partial_low, partial_high = percentile_interval(draws["partial"], confidence)
    return {
        "n_rows": int(y.size),
        "n_clusters": int(groups.max() + 1),
        "r2_base": float(base_fit.rsquared),
        "r2_full": float(full_fit.rsquared),
        "delta_r2": float(full_fit.rsquared - base_fit.rsquared),
        "delta_r2_ci_low": delta_low,
        "delta_r2_ci_high": delta_high,
        "delta_r2_p_value": bootstrap_p_value(draws["delta_r2"]),
        "beta_base": float(std_fit.params[1]),
        "beta_base_ci_low": float(std_ci[1, 0]),
        "beta_base_ci_high": float(std_ci[1, 1]),
        "beta_added": float(std_fit.params[2]),
        "beta_added_ci_low": float(std_ci[2, 0]),
        "beta_added_ci_high": float(std_ci[2, 1]),
        "partial_corr": float(point["partial"]),
        "partial_corr_ci_low": partial_low,
        "partial_corr_ci_high": partial_high,
        "corr_added_base": correlations(z, x)["pearson"],
        "n_resamples_used": int(np.isfinite(draws["delta_r2"]).sum()),
    }


# ----------------------------------------------------------------------------------------------------------
# Paired contrasts between policies


def matched_pairs(
    rows_a: pd.DataFrame,
    rows_b: pd.DataFrame,
    metric: str,
    question: str = "question_id",
    seed: str | None = "seed",
    extra: Sequence[str] = (),
) -> pd.DataFrame:
    """Rows of two policies matched on (question, seed): columns question, seed, a, b (+ <extra>_a/_b)."""
    keys = [question] + ([seed] if seed and seed in rows_a.columns and seed in rows_b.columns else [])
    columns = list(dict.fromkeys([metric, *extra]))  # a metric that is also an extra is selected once
    for name, frame in (("first", rows_a), ("second", rows_b)):
        missing = [c for c in (*keys, *columns) if c not in frame.columns]
        if missing:
            raise KeyError(f"{name} policy's rows lack columns {missing}")
        if frame.duplicated(subset=keys).any():
            raise ValueError(
                f"{name} policy has several rows for one ({', '.join(keys)}); split the rows by setting before pairing"
            )
    merged = rows_a[keys + columns].merge(rows_b[keys + columns], on=keys, suffixes=("_a", "_b"))
    merged["a"], merged["b"] = merged[f"{metric}_a"], merged[f"{metric}_b"]
    if metric not in extra:
        merged = merged.drop(columns=[f"{metric}_a", f"{metric}_b"])
    return merged.rename(columns={question: "question"})


def _per_question(pairs: pd.DataFrame) -> pd.DataFrame:
    return pairs.groupby("question", sort=False)[["a", "b"]].mean()


def paired_contrast(
    rows_a: pd.DataFrame,
    rows_b: pd.DataFrame,
    metric: str = "f1",
    question: str = "question_id",
    seed_column: str | None = "seed",
    n_resamples: int = 10000,
    confidence: float = 0.95,
    seed: int = 0,
) -> dict[str, float]:
    """Mean of ``metric`` for policy a minus policy b over their matched questions, with a paired bootstrap
    interval and two-sided p-value (``paired_bootstrap``) after averaging matched seeds within a question."""
    pairs = matched_pairs(rows_a, rows_b, metric, question, seed_column)
    per_question = _per_question(pairs)
    result = paired_bootstrap(
        per_question["a"].to_numpy(float),
        per_question["b"].to_numpy(float),
        n_resamples=n_resamples,
        confidence=confidence,
        seed=seed,
    )
    complete = per_question.dropna()
    return {
        "mean_a": float(complete["a"].mean()) if len(complete) else math.nan,
        "mean_b": float(complete["b"].mean()) if len(complete) else math.nan,
        **result,
        "n_pairs": len(pairs.dropna(subset=["a", "b"])),
    }


def gain_decomposition(
    rows_a: pd.DataFrame,
    rows_b: pd.DataFrame,
    metric: str = "f1",
    flag: str = ANSWER_IN_CONTEXT,
    question: str = "question_id",
    seed_column: str | None = "seed",
) -> dict[str, float]:
    """Split the mean gain of a over b into the part from pairs where ``flag`` went 0 -> 1 (the answer newly
    entered the context), 1 -> 0 (it left) and the rest.

    Each (question, seed) pair is weighted by 1 / (its question's number of pairs) and divided by the number
    of questions, so the three parts sum to the seed-averaged mean difference that ``paired_contrast``
    reports. ``entered_share`` is the share of the answer's transitions that were entries, n 0 -> 1 over
    n 0 -> 1 plus n 1 -> 0 (NaN without transitions): a share of pairs, between 0 and 1, unlike the entered
    part over the total, which runs off to -6.5 or 7.5 when the net change is near zero.
    """
    pairs = matched_pairs(rows_a, rows_b, metric, question, seed_column, extra=[flag]).dropna(subset=["a", "b"])
    if pairs.empty:
        return {
            "mean_diff": math.nan,
            "from_entered": math.nan,
            "from_left": math.nan,
            "from_others": math.nan,
            "entered_share": math.nan,
            "n_entered": 0,
            "n_left": 0,
            "n_pairs": 0,
            "n": 0,
        }
    weight = 1.0 / pairs.groupby("question")["a"].transform("size").to_numpy(float)
    n_questions = pairs["question"].nunique()
    contribution = weight * (pairs["a"] - pairs["b"]).to_numpy(float) / n_questions
    before, after = pairs[f"{flag}_b"].to_numpy(float), pairs[f"{flag}_a"].to_numpy(float)
    entered = (before == 0) & (after == 1)
    left = (before == 1) & (after == 0)
    total = float(contribution.sum())
    from_entered = float(contribution[entered].sum())
    transitions = int(entered.sum() + left.sum())
    return {
        "mean_diff": total,
        "from_entered": from_entered,
        "from_left": float(contribution[left].sum()),
        "from_others": float(contribution[~entered & ~left].sum()),
        "entered_share": int(entered.sum()) / transitions if transitions else math.nan,
        "n_entered": int(entered.sum()),
        "n_left": int(left.sum()),
        "n_pairs": len(pairs),
        "n": int(n_questions),
    }


# ----------------------------------------------------------------------------------------------------------
# Oracle headroom


def oracle_headroom(
    scores: pd.DataFrame, n_resamples: int = 10000, confidence: float = 0.95, seed: int = 0
) -> dict[str, Any]:
    """Headroom of a per-question oracle over the best single policy.

    ``scores`` has one row per question and one column per policy (seed-averaged values). Questions missing
    any policy are dropped. The oracle takes each question's best policy (ties: any, the value is the same);
    the best single policy has the highest mean (ties: the first column). The interval of the headroom is a
    paired bootstrap over questions. This is an upper bound on what choosing per question could gain, not
    a method.
    """
    if scores.shape[1] < 2:
        raise ValueError(f"oracle headroom needs at least two policies, got {list(scores.columns)}")
    complete = scores.dropna()
    if complete.empty:
        raise ValueError("no question has a value under every policy")
    means = complete.mean()
    best = means.idxmax()
    oracle = complete.max(axis=1)
    result = paired_bootstrap(
        oracle.to_numpy(float),
        complete[best].to_numpy(float),
        n_resamples=n_resamples,
        confidence=confidence,
        seed=seed,
    )
    return {
        "best_policy": best,
        "best_mean": float(means[best]),
        "oracle_mean": float(oracle.mean()),
        "headroom": float(oracle.mean() - means[best]),
        "ci_low": result["ci_low"],
        "ci_high": result["ci_high"],
        "share_improved": float((oracle > complete[best]).mean()),
        "n_policies": int(complete.shape[1]),
        "n": len(complete),
    }
