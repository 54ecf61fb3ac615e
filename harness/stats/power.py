"""Power of a paired contrast: the smallest true difference a design would detect.

A verdict whose interval includes zero means "no effect" only if the design could have seen the effect the
paper reports. For a paired contrast over n questions the minimum detectable effect (MDE) at level alpha
(two-sided) and the given power is the difference whose paired t-test rejects with that probability:
``d * sd`` where ``d`` solves statsmodels' ``TTestPower`` (the one-sample t-test on the per-question
differences) and ``sd`` is their standard deviation. For large n it approaches the normal-theory
``(z_{1-alpha/2} + z_{power}) * sd / sqrt(n)``: with sd = 0.5 (two binary outcomes that disagree half the
time) a +0.05 effect needs about 800 questions.

Questions are the unit: a question drawn by several seeds contributes its mean difference once, as the
question-clustered bootstrap intervals beside it resample whole questions.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats
from statsmodels.stats.power import TTestPower

ALPHA = 0.05
POWER = 0.8


def minimum_detectable_effect(sd: float, n: int, alpha: float = ALPHA, power: float = POWER) -> float:
    """The smallest absolute mean difference a two-sided paired t-test on ``n`` differences of standard
    deviation ``sd`` detects with probability ``power`` at level ``alpha``; NaN below two differences."""
    if n < 2 or not math.isfinite(sd):
        return math.nan
    if sd == 0:
        return 0.0
    effect = TTestPower().solve_power(effect_size=None, nobs=n, alpha=alpha, power=power, alternative="two-sided")
    return float(effect) * sd


def mde_from_standard_error(se: float, alpha: float = ALPHA, power: float = POWER) -> float:
    """The normal-theory MDE ``(z_{1-alpha/2} + z_{power}) * se`` of an estimate with standard error ``se``.

    For statistics with no t-test behind them, such as a ratio of totals over two independent samples of
    builds, whose standard error comes from a bootstrap."""
    if not math.isfinite(se):
        return math.nan
    return float((stats.norm.ppf(1 - alpha / 2) + stats.norm.ppf(power)) * se)


@dataclass(frozen=True)
class PairedPower:
    n: int  # questions
    sd: float  # standard deviation of the per-question differences
    mde: float  # minimum detectable effect at ALPHA, POWER


def paired_power(differences: pd.DataFrame, question: str = "question", value: str = "d") -> PairedPower:
    """n, SD and MDE of paired differences, each question's differences (one per seed) averaged first."""
    per_question = differences.groupby(question)[value].mean().to_numpy(dtype=float)
    per_question = per_question[np.isfinite(per_question)]
    n = int(per_question.size)
    sd = float(np.std(per_question, ddof=1)) if n >= 2 else math.nan
    return PairedPower(n=n, sd=sd, mde=minimum_detectable_effect(sd, n))
