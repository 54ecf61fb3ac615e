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
import statsmodels.api as sm
from scipy import stats
from statsmodels.stats.multitest import multipletests

from harness.stats.bootstrap import clustered_bootstrap, paired_bootstrap


def bootstrap_p_value(distribution: Any) -> float:
    """Two-sided p of 'mean is 0' from a bootstrap distribution of the mean, as in ``paired_bootstrap``:
    2 * min(P(d* <= 0), P(d* >= 0)), each with a +1 correction, capped at 1. NaN draws are ignored."""
    draws = np.asarray(distribution, dtype=float)
    draws = draws[~np.isnan(draws)]
    if draws.size == 0:
        return math.nan
    at_most = (np.count_nonzero(draws <= 0) + 1) / (draws.size + 1)
    at_least = (np.count_nonzero(draws >= 0) + 1) / (draws.size + 1)
    return float(min(1.0, 2.0 * min(at_most, at_least)))


def percentile_interval(distribution: Any, confidence: float = 0.95) -> tuple[float, float]:
    """Percentile interval of the finite bootstrap draws (NaN, NaN when there are none)."""
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must lie strictly between 0 and 1, got {confidence!r}")
    draws = np.asarray(distribution, dtype=float)
    draws = draws[np.isfinite(draws)]
    if draws.size == 0:
        return math.nan, math.nan
    tail = 100.0 * (1.0 - confidence) / 2.0
    low, high = np.percentile(draws, [tail, 100.0 - tail])
    return float(low), float(high)


def holm_adjust(p_values: Sequence[float]) -> np.ndarray:
    """Holm step-down adjusted p-values (statsmodels ``multipletests``); NaN entries stay NaN and are not
    counted in the family."""
    p = np.asarray(p_values, dtype=float)
    adjusted = np.full(p.shape, np.nan)
    finite = ~np.isnan(p)
    if finite.any():
        adjusted[finite] = multipletests(p[finite], method="holm")[1]
    return adjusted


def grouped_clustered_mean_ci(
    frame: pd.DataFrame,
    columns: Sequence[str],
    cluster: str,
    by: Sequence[str] = (),
    n_resamples: int = 10000,
    confidence: float = 0.95,
    seed: int = 0,
) -> pd.DataFrame:
    """Per group of ``by``: each column's NaN-ignoring row mean and its percentile interval from a bootstrap
    that resamples whole clusters (a question with all its seeds).

    All groups and columns share one set of cluster draws. Each drawn cluster brings its per-group sums and
    row counts, so a resampled mean is (sum over drawn clusters) / (rows of drawn clusters) -- the pooled row
    mean, as if the rows themselves had been resampled cluster by cluster -- and a group without some
    cluster simply gets no rows from it. Returns one row per group with ``<column>``, ``<column>_ci_low``,
    ``<column>_ci_high`` (NaN interval with fewer than two clusters).
    """
    columns, by = list(columns), list(by)
    missing = [c for c in (*columns, cluster, *by) if c not in frame.columns]
    if missing:
        raise KeyError(f"columns not in the frame: {missing}")
    if frame.empty:
        raise ValueError("grouped_clustered_mean_ci needs at least one row")
    values = frame[columns].astype(float)
    keys = [frame[cluster], *(frame[b] for b in by)]
    sums = values.fillna(0.0).groupby(keys, sort=True, observed=True, dropna=False).sum()
    counts = values.notna().astype(float).groupby(keys, sort=True, observed=True, dropna=False).sum()
    if by:  # clusters x (group, column)
        sums = sums.unstack(list(range(1, len(by) + 1)), fill_value=0.0)
        counts = counts.unstack(list(range(1, len(by) + 1)), fill_value=0.0)
        counts = counts.reindex(columns=sums.columns, fill_value=0.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        point = sums.sum(axis=0).to_numpy() / counts.sum(axis=0).to_numpy()
        if len(sums) >= 2:
            stacked = np.hstack([sums.to_numpy(), counts.to_numpy()])
            draws = clustered_bootstrap(stacked, np.arange(len(sums)), "mean", n_resamples, seed)
            width = sums.shape[1]
            ratios = draws[:, :width] / draws[:, width:]
        else:
            ratios = np.full((1, sums.shape[1]), np.nan)
    tail = 100.0 * (1.0 - confidence) / 2.0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN columns: no usable resample
        ratios = np.where(np.isfinite(ratios), ratios, np.nan)
        low, high = np.nanpercentile(ratios, [tail, 100.0 - tail], axis=0)
    result = pd.DataFrame({"mean": point, "ci_low": low, "ci_high": high}, index=sums.columns)
    if not by:
        return pd.DataFrame([{name: result.loc[c, stat] for c in columns for stat, name in
                              (("mean", c), ("ci_low", f"{c}_ci_low"), ("ci_high", f"{c}_ci_high"))}])
    result.index.names = ["__column__", *by]
    wide = result.unstack("__column__")  # groups x (stat, column)
    out = pd.DataFrame(index=wide.index)
    for column in columns:
        out[column] = wide[("mean", column)]
        out[f"{column}_ci_low"] = wide[("ci_low", column)]
        out[f"{column}_ci_high"] = wide[("ci_high", column)]
    return out.reset_index()


def clustered_mean_ci(
    frame: pd.DataFrame,
    columns: Sequence[str],
    cluster: str,
    n_resamples: int = 10000,
    confidence: float = 0.95,
    seed: int = 0,
) -> dict[str, tuple[float, float, float]]:
    """(mean, low, high) per column for one group of rows; see ``grouped_clustered_mean_ci``."""
    if frame.empty:
        return {c: (math.nan, math.nan, math.nan) for c in columns}
    row = grouped_clustered_mean_ci(frame, columns, cluster, (), n_resamples, confidence, seed).iloc[0]
    return {c: (float(row[c]), float(row[f"{c}_ci_low"]), float(row[f"{c}_ci_high"])) for c in columns}


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
            records.append({"diagnostic": diagnostic, "outcome": outcome,
                            **correlations(rows[diagnostic], rows[outcome])})
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
    base: str = "recall_at_k",
    added: str = "answer_in_context",
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
    data = rows[[outcome, base, added, cluster]].dropna()
    x = data[base].to_numpy(dtype=float)
    z = data[added].to_numpy(dtype=float)
    y = data[outcome].to_numpy(dtype=float)
    for name, values in ((base, x), (added, z), (outcome, y)):
        if values.size < 4 or np.ptp(values) == 0:
            raise ValueError(f"incremental validity needs {name!r} to vary over at least 4 rows "
                             f"({values.size} complete rows)")
    groups = pd.factorize(data[cluster])[0]

    base_fit = sm.OLS(y, sm.add_constant(x)).fit()
    full_fit = sm.OLS(y, sm.add_constant(np.column_stack([x, z]))).fit()

    def standardise(v: np.ndarray) -> np.ndarray:
        return (v - v.mean()) / v.std()

    # Standardised coefficients; question-clustered errors because a question appears under many policies.
    std_fit = sm.OLS(standardise(y), sm.add_constant(np.column_stack([standardise(x), standardise(z)]))).fit(
        cov_type="cluster", cov_kwds={"groups": groups})
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
    columns = [metric, *extra]
    for name, frame in (("first", rows_a), ("second", rows_b)):
        missing = [c for c in (*keys, *columns) if c not in frame.columns]
        if missing:
            raise KeyError(f"{name} policy's rows lack columns {missing}")
        if frame.duplicated(subset=keys).any():
            raise ValueError(f"{name} policy has several rows for one ({', '.join(keys)}); "
                             "split the rows by setting before pairing")
    merged = rows_a[keys + columns].merge(rows_b[keys + columns], on=keys, suffixes=("_a", "_b"))
    return merged.rename(columns={f"{metric}_a": "a", f"{metric}_b": "b", question: "question"})


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
    result = paired_bootstrap(per_question["a"].to_numpy(float), per_question["b"].to_numpy(float),
                              n_resamples=n_resamples, confidence=confidence, seed=seed)
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
    flag: str = "answer_in_context",
    question: str = "question_id",
    seed_column: str | None = "seed",
) -> dict[str, float]:
    """Split the mean gain of a over b into the part from pairs where ``flag`` went 0 -> 1 (the answer newly
    entered the context), 1 -> 0 (it left) and the rest.

    Each (question, seed) pair is weighted by 1 / (its question's number of pairs) and divided by the number
    of questions, so the three parts sum to the seed-averaged mean difference that ``paired_contrast``
    reports. ``share_entered`` is the entered part over the total (NaN when the total is 0).
    """
    pairs = matched_pairs(rows_a, rows_b, metric, question, seed_column, extra=[flag]).dropna(subset=["a", "b"])
    if pairs.empty:
        return {"mean_diff": math.nan, "from_entered": math.nan, "from_left": math.nan, "from_others": math.nan,
                "share_entered": math.nan, "n_entered": 0, "n_left": 0, "n_pairs": 0, "n": 0}
    weight = 1.0 / pairs.groupby("question")["a"].transform("size").to_numpy(float)
    n_questions = pairs["question"].nunique()
    contribution = weight * (pairs["a"] - pairs["b"]).to_numpy(float) / n_questions
    before, after = pairs[f"{flag}_b"].to_numpy(float), pairs[f"{flag}_a"].to_numpy(float)
    entered = (before == 0) & (after == 1)
    left = (before == 1) & (after == 0)
    total = float(contribution.sum())
    from_entered = float(contribution[entered].sum())
    return {
        "mean_diff": total,
        "from_entered": from_entered,
        "from_left": float(contribution[left].sum()),
        "from_others": float(contribution[~entered & ~left].sum()),
        "share_entered": from_entered / total if total != 0 else math.nan,
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
    result = paired_bootstrap(oracle.to_numpy(float), complete[best].to_numpy(float),
                              n_resamples=n_resamples, confidence=confidence, seed=seed)
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
