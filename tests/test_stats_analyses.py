import math

import numpy as np
import pandas as pd
import pytest
import statsmodels.api as sm
from statsmodels.stats.multitest import multipletests

from harness.stats.analyses import (
    correlations,
    diagnostic_correlations,
    gain_decomposition,
    holm_adjust,
    incremental_validity,
    matched_pairs,
    oracle_headroom,
    paired_contrast,
)
from harness.stats.bootstrap import (
    bootstrap_p_value,
    clustered_mean_ci,
    grouped_clustered_mean_ci,
    percentile_interval,
)


def policy_rows(values, flags=None, seeds=(1,)):
    """Rows of one policy: values[q][s] for question q and seed s (None = missing row)."""
    records = []
    for q, per_seed in enumerate(values):
        for s, value in zip(seeds, per_seed, strict=False):
            if value is None:
                continue
            record = {"question_id": f"q{q}", "seed": s, "f1": value}
            if flags is not None:
                record["answer_in_context"] = flags[q][seeds.index(s)]
            records.append(record)
    return pd.DataFrame(records)


def test_correlations_exact_and_degenerate():
    x = np.array([0.0, 1.0, 1.0, 0.0, 1.0])
    assert correlations(x, x) == {"pearson": pytest.approx(1.0), "spearman": pytest.approx(1.0), "n": 5}
    assert correlations(x, -2 * x + 1)["pearson"] == pytest.approx(-1.0)
    constant = correlations(x, np.ones(5))
    assert math.isnan(constant["pearson"]) and math.isnan(constant["spearman"])
    with_nan = correlations([0.0, 1.0, np.nan, 2.0, 3.0], [0.0, 1.0, 5.0, 2.0, 3.5])
    assert with_nan["n"] == 4


def test_diagnostic_correlations_table():
    rows = pd.DataFrame({"answer_in_context": [0, 1, 1, 0, 1.0], "recall_at_k": [0.5, 1, 0.5, 0.5, 1.0]})
    rows["f1"] = rows["answer_in_context"]
    rows["em"] = rows["answer_in_context"] * 0.5
    table = diagnostic_correlations(rows, ["answer_in_context", "recall_at_k"], ["f1", "em"])
    assert list(table["diagnostic"]) == ["answer_in_context"] * 2 + ["recall_at_k"] * 2
    assert table.loc[0, "pearson"] == pytest.approx(1.0) and table.loc[1, "spearman"] == pytest.approx(1.0)
    expected = np.corrcoef(rows["recall_at_k"], rows["f1"])[0, 1]
    assert table.loc[2, "pearson"] == pytest.approx(expected)
    with pytest.raises(KeyError, match="gold"):
        diagnostic_correlations(rows, ["gold"], ["f1"])


def test_incremental_validity_when_f1_is_answer_in_context():
    rng = np.random.default_rng(0)
    n = 300
    recall = rng.choice([0.0, 0.5, 1.0], size=n)
    aic = (rng.uniform(size=n) < 0.2 + 0.6 * recall).astype(float)
    rows = pd.DataFrame(
        {"question_id": [f"q{i % 100}" for i in range(n)], "recall_at_k": recall, "answer_in_context": aic, "f1": aic}
    )
    result = incremental_validity(rows, n_resamples=300, seed=1)
    base_r2 = np.corrcoef(recall, aic)[0, 1] ** 2
    assert result["r2_base"] == pytest.approx(base_r2)
    assert result["r2_full"] == pytest.approx(1.0)
    assert result["delta_r2"] == pytest.approx(1.0 - base_r2)
    assert 0.0 < result["delta_r2_ci_low"] <= result["delta_r2"] <= result["delta_r2_ci_high"] <= 1.0
    assert result["partial_corr"] == pytest.approx(1.0)
    assert result["beta_added"] == pytest.approx(1.0) and result["beta_base"] == pytest.approx(0.0, abs=1e-9)
    assert result["corr_added_base"] == pytest.approx(np.corrcoef(aic, recall)[0, 1])
    assert result["n_rows"] == n and result["n_clusters"] == 100


def test_incremental_validity_matches_statsmodels_on_noisy_data():
    rng = np.random.default_rng(4)
    n = 200
    x = rng.uniform(size=n)
    z = (rng.uniform(size=n) < 0.5 * (1 + x) / 1.5).astype(float)
    y = 0.3 * x + 0.4 * z + rng.normal(scale=0.2, size=n)
    rows = pd.DataFrame({"question_id": np.arange(n) // 2, "recall_at_k": x, "answer_in_context": z, "f1": y})
    result = incremental_validity(rows, n_resamples=200)
    full = sm.OLS(y, sm.add_constant(np.column_stack([x, z]))).fit()
    assert result["r2_full"] == pytest.approx(full.rsquared)
    # the standardised coefficient is the raw one scaled by sd(regressor) / sd(outcome)
    assert result["beta_added"] == pytest.approx(full.params[2] * z.std() / y.std())
    # partial correlation = correlation of the residuals of y and z on x
    res_y = sm.OLS(y, sm.add_constant(x)).fit().resid
    res_z = sm.OLS(z, sm.add_constant(x)).fit().resid
    assert result["partial_corr"] == pytest.approx(np.corrcoef(res_y, res_z)[0, 1])
    assert result["beta_added_ci_low"] < result["beta_added"] < result["beta_added_ci_high"]
    with pytest.raises(ValueError, match="recall_at_k"):
        incremental_validity(rows.assign(recall_at_k=1.0), n_resamples=10)


def test_paired_contrast_constant_shift_has_tight_interval():
    rng = np.random.default_rng(2)
    base = rng.uniform(size=(40, 2)).tolist()
    shifted = [[v + 0.1 for v in q] for q in base]
    result = paired_contrast(
        policy_rows(shifted, seeds=(1, 2)), policy_rows(base, seeds=(1, 2)), "f1", n_resamples=500, seed=0
    )
    assert result["mean_diff"] == pytest.approx(0.1)
    assert result["ci_low"] == pytest.approx(0.1) and result["ci_high"] == pytest.approx(0.1)
    assert result["p_value"] == pytest.approx(2 / 501)
    assert result["n"] == 40 and result["n_pairs"] == 80


def test_paired_contrast_matches_seeds_then_averages_within_question():
    a = policy_rows([[1.0, 0.0], [1.0, None]], seeds=(1, 2))
    b = policy_rows([[0.0, 0.0], [0.5, 0.0]], seeds=(1, 2))
    pairs = matched_pairs(a, b, "f1")
    assert len(pairs) == 3  # (q1, seed 2) has no partner
    result = paired_contrast(a, b, "f1", n_resamples=50)
    # q0: mean(1-0, 0-0) = 0.5; q1: 1-0.5 = 0.5 (seed 1 only)
    assert result["mean_diff"] == pytest.approx(0.5)
    assert result["mean_a"] == pytest.approx(0.75) and result["mean_b"] == pytest.approx(0.25)
    with pytest.raises(ValueError, match="several rows"):
        paired_contrast(pd.concat([a, a]), b, "f1")


def test_holm_adjustment_equals_statsmodels_and_by_hand():
    assert holm_adjust([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    p = np.random.default_rng(5).uniform(size=12) ** 3
    assert holm_adjust(p) == pytest.approx(multipletests(p, method="holm")[1])
    with_nan = holm_adjust([0.01, np.nan, 0.02])
    assert math.isnan(with_nan[1]) and with_nan[[0, 2]] == pytest.approx([0.02, 0.02])
    assert holm_adjust([]).size == 0


def test_gain_decomposition_by_hand():
    # q0: answer enters (0 -> 1), gain 0.6; q1: stays in, gain 0.3; q2: leaves (1 -> 0), loss 0.3
    a = policy_rows([[0.6], [0.8], [0.2]], flags=[[1], [1], [0]])
    b = policy_rows([[0.0], [0.5], [0.5]], flags=[[0], [1], [1]])
    parts = gain_decomposition(a, b, "f1")
    assert parts["mean_diff"] == pytest.approx(0.2)
    assert parts["from_entered"] == pytest.approx(0.2)
    assert parts["from_left"] == pytest.approx(-0.1)
    assert parts["from_others"] == pytest.approx(0.1)
    assert parts["entered_share"] == pytest.approx(0.5)  # one entry, one exit
    assert (parts["n_entered"], parts["n_left"], parts["n_pairs"], parts["n"]) == (1, 1, 3, 3)


def test_gain_decomposition_sums_to_the_seed_averaged_contrast():
    rng = np.random.default_rng(6)
    values_a, values_b = rng.uniform(size=(15, 3)).tolist(), rng.uniform(size=(15, 3)).tolist()
    values_a[3][1] = None  # an unmatched pair: question 3 then has two pairs, each weighted 1/2
    flags_a, flags_b = rng.integers(0, 2, size=(15, 3)).tolist(), rng.integers(0, 2, size=(15, 3)).tolist()
    a = policy_rows(values_a, flags_a, seeds=(1, 2, 3))
    b = policy_rows(values_b, flags_b, seeds=(1, 2, 3))
    parts = gain_decomposition(a, b, "f1")
    contrast = paired_contrast(a, b, "f1", n_resamples=20)
    assert parts["mean_diff"] == pytest.approx(contrast["mean_diff"])
    assert parts["from_entered"] + parts["from_left"] + parts["from_others"] == pytest.approx(parts["mean_diff"])


def test_oracle_headroom_by_hand():
    scores = pd.DataFrame({"A": [1.0, 0.0, 0.5, 0.2], "B": [0.0, 1.0, 0.4, np.nan]}, index=["q0", "q1", "q2", "q3"])
    result = oracle_headroom(scores, n_resamples=200)
    # q3 lacks B and is dropped; means A = 0.5, B = 0.4667; oracle per question (1, 1, 0.5)
    assert result["best_policy"] == "A" and result["best_mean"] == pytest.approx(0.5)
    assert result["oracle_mean"] == pytest.approx(2.5 / 3)
    assert result["headroom"] == pytest.approx(2.5 / 3 - 0.5)
    assert result["share_improved"] == pytest.approx(1 / 3)
    assert result["n"] == 3 and result["n_policies"] == 2
    with pytest.raises(ValueError, match="two policies"):
        oracle_headroom(scores[["A"]])


def test_bootstrap_helpers():
    assert bootstrap_p_value(np.ones(99)) == pytest.approx(2 / 100)
    assert bootstrap_p_value([-1.0, 1.0, np.nan]) == pytest.approx(1.0)
    assert math.isnan(bootstrap_p_value([np.nan]))
    assert percentile_interval(np.arange(101.0), 0.9) == pytest.approx((5.0, 95.0))
    with pytest.raises(ValueError, match="confidence"):
        percentile_interval([1.0], 95)


def test_clustered_mean_ci_shares_draws_and_handles_one_cluster():
    frame = pd.DataFrame({"q": ["a", "a", "b", "c"], "x": [1.0, 3.0, 2.0, 4.0], "y": [0.0, 0.0, 1.0, np.nan]})
    summary = clustered_mean_ci(frame, ["x", "y"], "q", n_resamples=300)
    assert summary["x"][0] == pytest.approx(2.5) and summary["y"][0] == pytest.approx(1 / 3)
    assert summary["x"][1] <= 2.5 <= summary["x"][2]
    single = clustered_mean_ci(frame[frame["q"] == "a"], ["x"], "q")
    assert single["x"][0] == pytest.approx(2.0) and math.isnan(single["x"][1])


def test_grouped_clustered_means_match_groupby_and_share_draws():
    rng = np.random.default_rng(8)
    frame = pd.DataFrame(
        {
            "q": np.repeat(np.arange(30), 4),
            "policy": np.tile(["a", "b"], 60),
            "budget": np.tile([64, 64, 96, 96], 30),
            "x": rng.normal(size=120),
        }
    )
    frame.loc[5, "x"] = np.nan
    table = grouped_clustered_mean_ci(frame, ["x"], "q", ["budget", "policy"], n_resamples=400, seed=2)
    expected = frame.groupby(["budget", "policy"])["x"].mean().to_numpy()
    assert table["x"].to_numpy() == pytest.approx(expected)
    assert (table["x_ci_low"] < table["x"]).all() and (table["x"] < table["x_ci_high"]).all()
    # a group alone gets the same draws (same clusters, same seed) as within the grouped call
    alone = clustered_mean_ci(frame[(frame["budget"] == 64) & (frame["policy"] == "a")], ["x"], "q", 400, seed=2)
    assert alone["x"] == pytest.approx(tuple(table.iloc[0][["x", "x_ci_low", "x_ci_high"]]))
