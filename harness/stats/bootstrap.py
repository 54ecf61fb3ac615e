"""Bootstrap confidence intervals and paired comparisons over per-question result rows: the generic
resampling helpers every analysis and report section draws on.

Plain and paired resampling go through :func:`scipy.stats.bootstrap` (percentile method, which
stays finite on constant data); a run summary's columns (:func:`summarize_columns`) make scipy's draws once
and take every column's resampled means as one matrix product. Resampling whole clusters of rows, i.e.
all rows of one question together, has no library counterpart and is written here, vectorised for the mean
(:func:`clustered_bootstrap`; per-group means with one shared set of draws:
:func:`grouped_clustered_mean_ci`). :func:`percentile_interval` and :func:`bootstrap_p_value` read an
interval and a two-sided p-value off any bootstrap distribution.
"""

from __future__ import annotations

import inspect
import math
import numbers
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pandas as pd

# Resampled arrays are built in batches of about this many elements (per column) to bound memory.
_BATCH_ELEMENTS = 2_000_000


def _check_resampling_args(n_resamples: int, confidence: float | None = None) -> None:
    if isinstance(n_resamples, bool) or not isinstance(n_resamples, numbers.Integral) or n_resamples < 1:
        raise ValueError(f"n_resamples must be a positive integer, got {n_resamples!r}")
    if confidence is not None and not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must lie strictly between 0 and 1, got {confidence!r}")


def _non_nan_values(values: Any, name: str = "values") -> np.ndarray:
    array = np.asarray(values, dtype=float)
    if array.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {array.shape}")
    return array[~np.isnan(array)]


def _percentile_bootstrap(sample: np.ndarray, n_resamples: int, confidence: float, seed: int):
    """scipy's percentile bootstrap of the mean along the last axis. A 2-D sample (one row per column of
    results, all of one length) shares the draws: each row's interval equals that of a call on the row
    alone, since the batches depend on the row length only."""
    # Imported here: scipy.stats takes half a second, and a run's summary (summarize_columns) never calls it.
    from scipy import stats

    # scipy >= 1.15 takes the generator as `rng`; older releases (the declared floor is 1.11) as `random_state`.
    rng_keyword = "rng" if "rng" in inspect.signature(stats.bootstrap).parameters else "random_state"
    return stats.bootstrap(
        (sample,),
        np.mean,
        n_resamples=n_resamples,
        confidence_level=confidence,
        method="percentile",
        vectorized=True,
        axis=-1,
        batch=_resample_batch(sample.shape[-1]),
        **{rng_keyword: np.random.default_rng(seed)},
    )


def bootstrap_mean_ci(
    values: Any, n_resamples: int = 2000, confidence: float = 0.95, seed: int = 0
) -> tuple[float, float, float]:
    """(mean, low, high): the mean of the non-NaN values and its percentile-bootstrap interval.

    With no values all three are NaN; with one value the interval is NaN (nothing to resample).
    """
    _check_resampling_args(n_resamples, confidence)
    sample = _non_nan_values(values)
    if sample.size == 0:
        return math.nan, math.nan, math.nan
    mean = float(sample.mean())
    if sample.size == 1:
        return mean, math.nan, math.nan
    interval = _percentile_bootstrap(sample, n_resamples, confidence, seed).confidence_interval
    return mean, float(interval.low), float(interval.high)


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


def paired_bootstrap(
    a: Any, b: Any, n_resamples: int = 10000, confidence: float = 0.95, seed: int = 0
) -> dict[str, float]:
    """Paired comparison of two systems' per-question values (``a`` minus ``b``).

    Questions where either value is NaN are dropped. The p-value is two-sided from the bootstrap
    distribution of the mean difference (:func:`bootstrap_p_value`).
    """
    _check_resampling_args(n_resamples, confidence)
    first = np.asarray(a, dtype=float)
    second = np.asarray(b, dtype=float)
    if first.ndim != 1 or first.shape != second.shape:
        raise ValueError(
            f"paired values need two 1-D arrays of equal length, got shapes {first.shape} and {second.shape}"
        )
    keep = ~(np.isnan(first) | np.isnan(second))
    diffs = first[keep] - second[keep]
    n = int(diffs.size)
    if n == 0:
        return {"mean_diff": math.nan, "ci_low": math.nan, "ci_high": math.nan, "p_value": math.nan, "n": 0}
    mean_diff = float(diffs.mean())
    if n == 1:
        return {"mean_diff": mean_diff, "ci_low": math.nan, "ci_high": math.nan, "p_value": math.nan, "n": 1}
    result = _percentile_bootstrap(diffs, n_resamples, confidence, seed)
    return {
        "mean_diff": mean_diff,
        "ci_low": float(result.confidence_interval.low),
        "ci_high": float(result.confidence_interval.high),
        "p_value": bootstrap_p_value(result.bootstrap_distribution),
        "n": n,
    }


def _resample_batch(n: int) -> int:
    """Resamples drawn at once for ``n`` values: scipy's ``batch`` here, so the draws below are scipy's."""
    return max(1, _BATCH_ELEMENTS // n)


def _cluster_draws(n_clusters: int, n_resamples: int, seed: int):
    """Yield batches of resampled cluster codes, shape (batch, n_clusters); same stream for every statistic, and
    for ``n_clusters`` single values the index arrays scipy's bootstrap draws with this seed."""
    rng = np.random.default_rng(seed)
    batch = _resample_batch(n_clusters)
    for start in range(0, n_resamples, batch):
        yield rng.integers(0, n_clusters, size=(min(batch, n_resamples - start), n_clusters))


def _draw_counts(n_clusters: int, n_resamples: int, seed: int):
    """:func:`_cluster_draws` as counts, shape (batch, n_clusters): how often each cluster is drawn in each
    resample, so a resample's sum over the data is a matrix product."""
    for draws in _cluster_draws(n_clusters, n_resamples, seed):
        offsets = np.arange(draws.shape[0])[:, None] * n_clusters
        counts = np.bincount((draws + offsets).ravel(), minlength=draws.shape[0] * n_clusters)
        yield counts.reshape(draws.shape[0], n_clusters).astype(float)


def _clustered_means(data: np.ndarray, codes: np.ndarray, n_clusters: int, n_resamples: int, seed: int) -> np.ndarray:
    # The mean over concatenated rows is (sum of drawn clusters' sums) / (sum of their row counts),
    # so each resample reduces to a count vector over clusters times per-cluster totals.
    columns = data.reshape(len(data), -1)
    valid = ~np.isnan(columns)
    cluster_sums = np.zeros((n_clusters, columns.shape[1]))
    cluster_sizes = np.zeros((n_clusters, columns.shape[1]))
    np.add.at(cluster_sums, codes, np.where(valid, columns, 0.0))
    np.add.at(cluster_sizes, codes, valid.astype(float))
    out = []
    for counts in _draw_counts(n_clusters, n_resamples, seed):
        with np.errstate(invalid="ignore", divide="ignore"):
            out.append((counts @ cluster_sums) / (counts @ cluster_sizes))
    means = np.concatenate(out, axis=0)
    return means[:, 0] if data.ndim == 1 else means


def clustered_bootstrap(
    values: Any,
    clusters: Sequence[Any] | np.ndarray | pd.Series,
    statistic: str | Callable[[Any], Any] = "mean",
    n_resamples: int = 2000,
    seed: int = 0,
) -> np.ndarray:
    """Bootstrap distribution of ``statistic`` when whole clusters (e.g. question ids) are resampled.

    Each resample draws as many clusters as there are, with replacement, and concatenates their rows.
    ``statistic="mean"`` takes the NaN-ignoring column mean without materialising rows (returns shape
    ``(n_resamples,)`` for 1-D values, ``(n_resamples, n_columns)`` for 2-D). A callable receives the
    resampled rows in the type of ``values`` (DataFrame/Series rows via ``.iloc``, else an array);
    pass ``values=np.arange(n)`` to receive row indices instead.
    """
    _check_resampling_args(n_resamples)
    cluster_labels = np.asarray(clusters, dtype=object)
    if cluster_labels.ndim != 1 or len(cluster_labels) != len(values):
        raise ValueError(
            f"clusters must be 1-D with one label per row: {len(cluster_labels)} labels for {len(values)} rows"
        )
    if len(cluster_labels) == 0:
        raise ValueError("clustered_bootstrap needs at least one row")
    codes, uniques = pd.factorize(pd.Series(cluster_labels), use_na_sentinel=True)
    if (codes < 0).any():
        raise ValueError(f"cluster labels must not be missing; row {int(np.flatnonzero(codes < 0)[0])} has none")
    n_clusters = len(uniques)

    if isinstance(statistic, str):
        if statistic != "mean":
            raise ValueError(f"statistic must be 'mean' or a callable, got {statistic!r}")
        data = np.asarray(values.to_numpy() if isinstance(values, (pd.DataFrame, pd.Series)) else values, dtype=float)
        if data.ndim not in (1, 2):
            raise ValueError(f"values for the mean must be 1-D or 2-D, got shape {data.shape}")
        return _clustered_means(data, codes, n_clusters, n_resamples, seed)

    # Rows grouped by cluster: cluster g occupies order[starts[g] : starts[g] + sizes[g]].
    order = np.argsort(codes, kind="stable")
    sizes = np.bincount(codes, minlength=n_clusters)
    starts = np.cumsum(sizes) - sizes
    is_pandas = isinstance(values, (pd.DataFrame, pd.Series))
    array = None if is_pandas else np.asarray(values)
    results = []
    for draws in _cluster_draws(n_clusters, n_resamples, seed):
        for drawn in draws:
            lengths = sizes[drawn]
            run_starts = np.cumsum(lengths) - lengths
            positions = np.repeat(starts[drawn] - run_starts, lengths) + np.arange(lengths.sum())
            rows = order[positions]
            results.append(statistic(values.iloc[rows] if is_pandas else array[rows]))
    return np.asarray(results)


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
        return pd.DataFrame(
            [
                {
                    name: result.loc[c, stat]
                    for c in columns
                    for stat, name in (("mean", c), ("ci_low", f"{c}_ci_low"), ("ci_high", f"{c}_ci_high"))
                }
            ]
        )
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


def _resampled_means(sample: np.ndarray, n_resamples: int, seed: int) -> np.ndarray:
    """The bootstrap distribution of each row's mean (rows x n_resamples), from the draws scipy's
    :func:`_percentile_bootstrap` makes for a sample of this length and seed. Counted per (resample, value),
    the means of every row are one matrix product rather than a gathered copy of the sample per row (a run
    summary's dozen columns cost about what one did)."""
    n = sample.shape[-1]
    return np.concatenate([sample @ counts.T / n for counts in _draw_counts(n, n_resamples, seed)], axis=-1)


def summarize_columns(df: pd.DataFrame, columns: Sequence[str], n_resamples: int = 2000, seed: int = 0) -> pd.DataFrame:
    """One row per metric column: its NaN-ignoring mean, bootstrap interval and number of non-NaN rows.

    Each interval is the one :func:`bootstrap_mean_ci` gives the column alone (the same draws, to rounding):
    columns with the same number of non-missing rows share one set of draws, as separate scipy calls with
    one seed would."""
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise KeyError(f"columns not in the results frame: {missing}")
    _check_resampling_args(n_resamples)
    values = {column: pd.to_numeric(df[column], errors="raise").to_numpy(dtype=float) for column in columns}
    by_length: dict[int, list[str]] = {}
    for column, array in values.items():
        by_length.setdefault(int(np.count_nonzero(~np.isnan(array))), []).append(column)
    figures: dict[str, tuple[float, float, float]] = {}
    for length, group in by_length.items():
        if length < 2:  # nothing to resample (bootstrap_mean_ci's NaN cases)
            figures.update({c: bootstrap_mean_ci(values[c], n_resamples, seed=seed) for c in group})
            continue
        sample = np.stack([_non_nan_values(values[c]) for c in group])
        low, high = np.quantile(_resampled_means(sample, n_resamples, seed), [0.025, 0.975], axis=-1)
        for row, column in enumerate(group):
            figures[column] = (float(sample[row].mean()), float(low[row]), float(high[row]))
    rows = [
        {
            "metric": column,
            "mean": figures[column][0],
            "ci_low": figures[column][1],
            "ci_high": figures[column][2],
            "n": int(np.count_nonzero(~np.isnan(values[column]))),
        }
        for column in columns
    ]
    return pd.DataFrame(rows, columns=["metric", "mean", "ci_low", "ci_high", "n"])
