import itertools
import math

import numpy as np
import pandas as pd
import pytest

from harness.stats import bootstrap_mean_ci, clustered_bootstrap, paired_bootstrap, summarize_columns


def test_mean_ci_contains_mean_and_is_reproducible():
    values = np.random.default_rng(0).normal(0.3, 1.0, size=400)
    mean, low, high = bootstrap_mean_ci(values, seed=1)
    assert mean == pytest.approx(values.mean())
    assert low < mean < high
    # the normal-theory width 2 * 1.96 * sd / sqrt(n) is about 0.196
    assert 0.15 < high - low < 0.25
    assert bootstrap_mean_ci(values, seed=1) == (mean, low, high)
    assert bootstrap_mean_ci(values, seed=2) != (mean, low, high)


def test_mean_ci_ignores_nans_and_handles_degenerate_data():
    values = np.array([0.0, 1.0, 1.0, 0.0, 1.0])
    with_nans = np.array([0.0, np.nan, 1.0, 1.0, 0.0, np.nan, 1.0])
    assert bootstrap_mean_ci(with_nans, seed=3) == bootstrap_mean_ci(values, seed=3)
    assert bootstrap_mean_ci(np.full(10, 0.7)) == pytest.approx((0.7, 0.7, 0.7))
    assert all(math.isnan(x) for x in bootstrap_mean_ci([np.nan, np.nan]))
    mean, low, high = bootstrap_mean_ci([0.4])
    assert mean == 0.4 and math.isnan(low) and math.isnan(high)
    with pytest.raises(ValueError, match="confidence"):
        bootstrap_mean_ci(values, confidence=95)


def test_paired_bootstrap_clear_shift_has_small_p():
    rng = np.random.default_rng(0)
    b = rng.normal(size=200)
    a = b + 0.5 + rng.normal(scale=0.1, size=200)
    result = paired_bootstrap(a, b, n_resamples=2000, seed=0)
    assert result["n"] == 200
    assert result["mean_diff"] == pytest.approx((a - b).mean())
    assert 0.0 < result["ci_low"] < result["mean_diff"] < result["ci_high"]
    assert result["p_value"] == pytest.approx(2 / 2001)  # no resample reaches 0: only the +1 correction


def test_paired_bootstrap_no_shift_has_large_p():
    rng = np.random.default_rng(1)
    a = rng.normal(size=300)
    noise = rng.normal(size=150)
    b = a + np.concatenate([noise, -noise])  # differences sum to exactly zero
    result = paired_bootstrap(a, b, n_resamples=2000, seed=0)
    assert result["mean_diff"] == pytest.approx(0.0, abs=1e-12)
    assert result["ci_low"] < 0.0 < result["ci_high"]
    assert result["p_value"] > 0.5


def test_paired_bootstrap_p_value_by_hand_and_nan_pairs():
    # constant positive differences: every resampled mean is 1, so p = 2 * (0 + 1) / (99 + 1)
    result = paired_bootstrap([2.0, 3.0, np.nan], [1.0, 2.0, 0.0], n_resamples=99)
    assert result["n"] == 2
    assert result["p_value"] == pytest.approx(0.02)
    assert (result["ci_low"], result["ci_high"]) == pytest.approx((1.0, 1.0))
    # identical systems: both tails hold every resample, p is capped at 1
    assert paired_bootstrap([1.0, 0.0, 1.0], [1.0, 0.0, 1.0], n_resamples=50)["p_value"] == 1.0
    with pytest.raises(ValueError, match="equal length"):
        paired_bootstrap([1.0, 2.0], [1.0])


# question -> (rows, value of every row): the value is constant within each cluster
CLUSTERS = {"q1": (2, 1.0), "q2": (1, 0.0), "q3": (3, 0.5)}


def _cluster_rows():
    labels = [q for q, (size, _) in CLUSTERS.items() for _ in range(size)]
    values = np.array([CLUSTERS[q][1] for q in labels])
    return values, np.array(labels)


def test_clustered_mean_takes_only_possible_cluster_mixtures():
    values, labels = _cluster_rows()
    means = clustered_bootstrap(values, labels, "mean", n_resamples=500, seed=0)
    assert means.shape == (500,)
    # every resample is 3 clusters drawn with replacement: its mean is a size-weighted mix of their values
    possible = []
    for combo in itertools.combinations_with_replacement(CLUSTERS.values(), 3):
        possible.append(sum(s * v for s, v in combo) / sum(s for s, _ in combo))
    assert np.isclose(means[:, None], np.array(possible)[None, :]).any(axis=1).all()
    assert len(np.unique(np.round(means, 12))) > 3


def test_clustered_vectorised_mean_equals_callable_paths():
    values, labels = _cluster_rows()
    fast = clustered_bootstrap(values, labels, "mean", n_resamples=300, seed=5)
    slow = clustered_bootstrap(values, labels, np.mean, n_resamples=300, seed=5)
    frame = pd.DataFrame({"x": values})
    via_frame = clustered_bootstrap(frame, labels, lambda df: df["x"].mean(), n_resamples=300, seed=5)
    np.testing.assert_allclose(fast, slow)
    np.testing.assert_allclose(fast, via_frame)


def test_clustered_resamples_whole_clusters():
    values, labels = _cluster_rows()
    sizes = {q: size for q, (size, _) in CLUSTERS.items()}

    def whole_clusters(idx):
        counts = pd.Series(labels[idx]).value_counts()
        return all(counts[q] % sizes[q] == 0 for q in counts.index)

    assert clustered_bootstrap(np.arange(len(values)), labels, whole_clusters, n_resamples=100, seed=0).all()


def test_clustered_constant_statistic_and_spread():
    assert np.all(clustered_bootstrap(np.full(6, 2.0), _cluster_rows()[1], "mean", n_resamples=50) == 2.0)
    # 200 questions x 5 identical rows: the spread is that of 200 cluster means, not of 1000 free rows
    rng = np.random.default_rng(0)
    cluster_values = rng.normal(size=200)
    values = np.repeat(cluster_values, 5)
    labels = np.repeat(np.arange(200), 5)
    means = clustered_bootstrap(values, labels, "mean", n_resamples=2000, seed=0)
    assert means.std() == pytest.approx(cluster_values.std() / np.sqrt(200), rel=0.1)


def test_clustered_mean_two_columns_and_nans():
    values = np.array([[1.0, np.nan], [3.0, 4.0], [5.0, 6.0]])
    means = clustered_bootstrap(values, ["a", "a", "b"], "mean", n_resamples=200, seed=0)
    assert means.shape == (200, 2)
    # column 0 mixes {a: 1, 3} and {b: 5}; column 1 has a single valid row per cluster
    allowed_0 = [2.0, 5.0, (1 + 3 + 5) / 3]
    allowed_1 = [4.0, 6.0, 5.0]
    assert np.isclose(means[:, :1], allowed_0).any(axis=1).all()
    assert np.isclose(means[:, 1:], allowed_1).any(axis=1).all()
    with pytest.raises(ValueError, match="one label per row"):
        clustered_bootstrap(values, ["a", "b"], "mean")
    with pytest.raises(ValueError, match="median"):
        clustered_bootstrap(values, ["a", "a", "b"], "median")


def test_summarize_columns():
    df = pd.DataFrame({"em": [1.0, 0.0, 1.0, 1.0, np.nan], "f1": [1.0, 0.5, 0.8, 0.9, 0.2], "hit": [True] * 5})
    summary = summarize_columns(df, ["em", "f1", "hit"], n_resamples=500, seed=0)
    assert list(summary.columns) == ["metric", "mean", "ci_low", "ci_high", "n"]
    assert list(summary["metric"]) == ["em", "f1", "hit"]
    assert list(summary["n"]) == [4, 5, 5]
    assert summary["mean"].tolist() == pytest.approx([0.75, 0.68, 1.0])
    assert (summary["ci_low"] <= summary["mean"]).all() and (summary["mean"] <= summary["ci_high"]).all()
    with pytest.raises(KeyError, match="rouge"):
        summarize_columns(df, ["em", "rouge"])


@pytest.mark.parametrize("n", [57, 3001])  # 3001 rows: 700 resamples come in two of scipy's batches
def test_summarize_columns_resampled_together_equal_one_column_at_a_time(n):
    """Columns with as many non-missing rows share one set of draws: each interval is the one scipy's
    bootstrap (bootstrap_mean_ci) gives the column alone, to rounding."""
    rng = np.random.default_rng(3)
    frame = pd.DataFrame({f"m{i}": rng.random(n) for i in range(6)})  # six columns, one mask: two calls
    frame["binary"] = rng.integers(0, 2, n).astype(float)
    frame["holes"] = np.where(rng.random(n) < 0.3, np.nan, rng.random(n))
    frame["one"] = [np.nan] * (n - 1) + [0.5]
    frame["none"] = np.nan
    summary = summarize_columns(frame, list(frame.columns), n_resamples=700, seed=11).set_index("metric")
    for column in frame.columns:
        alone = bootstrap_mean_ci(frame[column].to_numpy(), n_resamples=700, seed=11)
        together = summary.loc[column, ["mean", "ci_low", "ci_high"]].to_numpy(dtype=float)
        np.testing.assert_allclose(together, alone, rtol=0, atol=1e-12, equal_nan=True)
    assert summary.loc["holes", "n"] == frame["holes"].notna().sum()
    assert summary.loc["one", "n"] == 1 and np.isnan(summary.loc["one", "ci_low"])
    assert summary.loc["none", "n"] == 0 and np.isnan(summary.loc["none", "mean"])
