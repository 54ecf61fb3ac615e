"""The minimum detectable effect against a hand-worked case and against a simulation of the test it stands for."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from harness.stats.power import mde_from_standard_error, minimum_detectable_effect, paired_power


def test_large_n_matches_the_normal_formula_worked_by_hand():
    # (z_0.975 + z_0.8) * sd / sqrt(n) = (1.959964 + 0.841621) * 0.5 / sqrt(800) = 0.049526
    assert minimum_detectable_effect(0.5, 800) == pytest.approx(0.049526, abs=0.0003)
    # the t-test needs a little more than the normal approximation at small n
    assert minimum_detectable_effect(0.5, 20) > (1.959964 + 0.841621) * 0.5 / math.sqrt(20)


def test_edge_cases():
    assert math.isnan(minimum_detectable_effect(0.5, 1))
    assert minimum_detectable_effect(0.0, 50) == 0.0
    assert minimum_detectable_effect(1.0, 100) == pytest.approx(2 * minimum_detectable_effect(0.5, 100))


def test_a_true_effect_of_one_mde_is_detected_80_percent_of_the_time():
    n, sd = 60, 0.5
    mde = minimum_detectable_effect(sd, n)
    rng = np.random.default_rng(0)
    trials = 4000
    samples = rng.normal(mde, sd, size=(trials, n))
    rejected = stats.ttest_1samp(samples, 0.0, axis=1).pvalue < 0.05
    assert rejected.mean() == pytest.approx(0.80, abs=0.02)


def test_paired_power_averages_seeds_within_a_question():
    frame = pd.DataFrame({"question": ["a", "a", "b", "c"], "d": [1.0, 0.0, 1.0, 0.0]})
    power = paired_power(frame)
    # per question: a 0.5, b 1.0, c 0.0 -> sd 0.5 over n = 3
    assert power.n == 3 and power.sd == pytest.approx(0.5)
    assert power.mde == pytest.approx(minimum_detectable_effect(0.5, 3))


def test_the_mde_of_a_bootstrap_standard_error_is_the_normal_formula():
    # (1.959964 + 0.841621) * 0.1 = 0.280159
    assert mde_from_standard_error(0.1) == pytest.approx(0.280159, abs=1e-6)
    assert math.isnan(mde_from_standard_error(math.nan))
    # a normal estimate whose true value is one MDE leaves zero outside its 95% interval 80% of the time
    rng = np.random.default_rng(1)
    estimates = rng.normal(mde_from_standard_error(0.1), 0.1, size=20000)
    assert (np.abs(estimates / 0.1) > 1.959964).mean() == pytest.approx(0.80, abs=0.01)
