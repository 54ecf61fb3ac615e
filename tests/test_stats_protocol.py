import math

import numpy as np
import pandas as pd
import pytest
from statsmodels.stats.multitest import multipletests

from harness.stats.power import minimum_detectable_effect
from harness.stats.protocol import (
    diversity_study,
    level_contrasts,
    minimax_regret,
    misspecification_downside,
    operating_points,
    per_query_oracles,
    regret_power,
    split_questions,
    tune_operating_points,
)


def score_frame(entries, questions, seeds=(1, 2), base=None):
    """Long score frame: value = base[question, seed] + offset for each (method, point, level, offset)."""
    base = base if base is not None else {}
    records = []
    for method, point, level, offset in entries:
        for q in questions:
            for s in seeds:
                records.append(
                    {
                        "method": method,
                        "point": point,
                        "level": level,
                        "question": q,
                        "seed": s,
                        "value": base.get((q, s), 0.5) + offset,
                    }
                )
    return pd.DataFrame(records)


def test_split_is_disjoint_twenty_percent_and_reproducible():
    ids = [f"q{i:02d}" for i in range(50)]
    val, test = split_questions(ids, val_fraction=0.2, seed=3)
    assert len(val) == 10 and len(test) == 40
    assert set(val).isdisjoint(test) and set(val) | set(test) == set(ids)
    again_val, again_test = split_questions(list(reversed(ids)) + ids[:5], val_fraction=0.2, seed=3)
    assert list(again_val) == list(val) and list(again_test) == list(test)  # order and repeats do not matter
    assert list(split_questions(ids, 0.2, seed=4)[0]) != list(val)
    assert len(split_questions(ids[:3], 0.2, seed=0)[0]) == 1  # at least one id each side
    with pytest.raises(ValueError, match="val_fraction"):
        split_questions(ids, val_fraction=1.0)
    with pytest.raises(ValueError, match="2 distinct"):
        split_questions(["q0", "q0"])


def test_tuned_point_is_the_validation_argmax_not_the_test_one():
    questions = [f"q{i}" for i in range(10)]
    val, _ = split_questions(questions, 0.2, seed=0)
    # lambda 0.3 is better on validation queries, lambda 0.7 on test queries
    base = {(q, s): 0.5 for q in questions for s in (1, 2)}
    frame = score_frame(
        [("mmr", "lambda_=0.3", 0.0, 0.0), ("mmr", "lambda_=0.7", 0.0, 0.0), ("knn", "default", 0.0, -0.1)],
        questions,
        base=base,
    )
    on_val = frame["question"].isin(val)
    frame.loc[on_val & (frame["point"] == "lambda_=0.3"), "value"] += 0.2
    frame.loc[~on_val & (frame["point"] == "lambda_=0.7"), "value"] += 0.3
    tuning = tune_operating_points(frame, val).set_index(["method", "point"])
    assert tuning.loc[("mmr", "lambda_=0.3"), "chosen"] and not tuning.loc[("mmr", "lambda_=0.7"), "chosen"]
    assert tuning.loc[("mmr", "lambda_=0.3"), "val_score"] == pytest.approx(0.7)
    assert tuning.loc[("mmr", "lambda_=0.7"), "val_score"] == pytest.approx(0.5)
    assert tuning.loc[("knn", "default"), "chosen"]
    assert set(tuning["n_val_queries"]) == {2}


def test_tuning_weighs_levels_equally_and_can_use_one_level():
    questions = ["a", "b", "c", "d", "e"]
    frame = score_frame(
        [("mmr", "x", 0.0, 0.30), ("mmr", "x", 0.4, 0.0), ("mmr", "y", 0.0, 0.10), ("mmr", "y", 0.4, 0.15)], questions
    )
    pooled = tune_operating_points(frame, questions).set_index("point")
    assert pooled.loc["x", "val_score"] == pytest.approx(0.65) and pooled.loc["x", "chosen"]
    heavy = tune_operating_points(frame, questions, tune_level=0.4).set_index("point")
    assert heavy.loc["y", "chosen"] and not heavy.loc["x", "chosen"]
    with pytest.raises(ValueError, match="tune_level"):
        tune_operating_points(frame, questions, tune_level=0.9)


def test_minimax_regret_by_hand():
    table = pd.DataFrame({0.0: [0.8, 0.6], 0.4: [0.4, 0.7]}, index=["A", "B"])
    regret = minimax_regret(table).set_index("method")
    # best per level (0.8, 0.7): A regrets (0, 0.3), B (0.2, 0)
    assert regret.loc["A", "regret@0.0"] == pytest.approx(0.0) and regret.loc["A", "regret@0.4"] == pytest.approx(0.3)
    assert regret.loc["B", "regret@0.0"] == pytest.approx(0.2) and regret.loc["B", "regret@0.4"] == pytest.approx(0.0)
    assert regret["max_regret"].to_dict() == pytest.approx({"A": 0.3, "B": 0.2})
    assert regret["minimax"].to_dict() == {"A": False, "B": True}


def test_regret_power_tests_the_difference_behind_each_largest_regret_by_hand():
    at_heavy = {"A": [0.1, 0.3, 0.5, 0.3], "B": [0.5, 0.6, 0.7, 0.6]}
    records = [
        {"method": m, "point": "p", "level": level, "question": f"q{i}", "seed": 1, "value": value}
        for m in ("A", "B")
        for level, values in ((0.0, [0.9 if m == "A" else 0.8] * 4), (0.4, at_heavy[m]))
        for i, value in enumerate(values)
    ]
    scores = pd.DataFrame(records)
    table = pd.DataFrame({0.0: [0.9, 0.8], 0.4: [0.3, 0.6]}, index=["A", "B"])
    power = regret_power(scores, {"A": "p", "B": "p"}, table).set_index("method")
    # A's largest regret (0.3) is at 0.4 against B: differences -0.4, -0.3, -0.2, -0.3, SD sqrt(0.02 / 3)
    assert power.loc["A", "regret_level"] == 0.4 and power.loc["A", "regret_vs"] == "B"
    assert power.loc["A", "regret_n"] == 4
    assert power.loc["A", "regret_sd"] == pytest.approx(math.sqrt(0.02 / 3))
    assert power.loc["A", "regret_mde"] == pytest.approx(minimum_detectable_effect(math.sqrt(0.02 / 3), 4))
    # B's (0.1) is at 0.0 against A, a constant difference: SD 0, every effect detectable
    assert power.loc["B", "regret_vs"] == "A" and power.loc["B", "regret_mde"] == 0.0


def test_misspecification_downside_by_hand():
    table = pd.DataFrame(
        {0.0: [0.8, 0.7, 0.9], 0.2: [0.6, 0.65, 0.5], 0.4: [0.4, 0.6, 0.45]}, index=["knn", "mmr", "dpp"]
    )
    out = misspecification_downside(table, reference="knn").set_index("method")
    # mmr loses 0.1 on clean pools, wins elsewhere; dpp loses 0.1 at 0.2 and wins 0.05 at 0.4
    assert out.loc["mmr", "downside"] == pytest.approx(0.1) and out.loc["mmr", "worst_level"] == 0.0
    assert out.loc["dpp", "downside"] == pytest.approx(0.1) and out.loc["dpp", "worst_level"] == 0.2
    assert out.loc["mmr", "loss_at_heaviest"] == pytest.approx(-0.2)
    with pytest.raises(ValueError, match="reference"):
        misspecification_downside(table, reference="rng")


def test_per_query_oracles_by_hand():
    rows = pd.DataFrame(
        [
            # question, method, point, value
            ("q0", "knn", "default", 0.5),
            ("q1", "knn", "default", 0.5),
            ("q0", "mmr", "a", 0.6),
            ("q1", "mmr", "a", 0.2),
            ("q0", "mmr", "b", 0.1),
            ("q1", "mmr", "b", 0.4),
        ],
        columns=["question", "method", "point", "value"],
    ).assign(level=0.0, seed=1)
    oracles = per_query_oracles(rows, {"knn": "default", "mmr": "a"}).set_index("method")
    # mmr per query: max(0.6, 0.1) = 0.6, max(0.2, 0.4) = 0.4 -> mean 0.5, beats knn on q0 only
    assert oracles.loc["mmr", "oracle_mean"] == pytest.approx(0.5)
    assert oracles.loc["mmr", "tuned_mean"] == pytest.approx(0.4)
    assert oracles.loc["mmr", "share_improved"] == pytest.approx(0.5)
    # all methods: (0.6, 0.5)
    assert oracles.loc["all methods", "oracle_mean"] == pytest.approx(0.55)
    assert oracles.loc["all methods", "share_improved"] == pytest.approx(0.5)


def test_level_contrasts_constant_effects_and_holm():
    questions = [f"q{i}" for i in range(12)]
    rng = np.random.default_rng(0)
    base = {(q, s, lv): rng.uniform() for q in questions for s in (1, 2) for lv in (0.0, 0.5)}
    frame = score_frame(
        [
            ("knn", "default", 0.0, 0.0),
            ("knn", "default", 0.5, 0.0),
            ("mmr", "l", 0.0, -0.05),
            ("mmr", "l", 0.5, 0.1),
            ("dpp", "default", 0.0, 0.0),
            ("dpp", "default", 0.5, 0.02),
        ],
        questions,
    )
    frame["value"] += [
        base[(q, s, lv)] for q, s, lv in zip(frame["question"], frame["seed"], frame["level"], strict=False)
    ]
    chosen = {"knn": "default", "mmr": "l", "dpp": "default"}
    out = level_contrasts(frame, chosen, n_resamples=199, seed=0)
    mmr = out[out["method"] == "mmr"].set_index("kind")
    per_level = mmr[mmr.index == "level"].set_index("level")
    assert per_level.loc[0.0, "mean_diff"] == pytest.approx(-0.05)
    assert per_level.loc[0.5, "mean_diff"] == pytest.approx(0.1)
    assert mmr.loc["interaction", "mean_diff"] == pytest.approx(0.15)
    assert mmr.loc["interaction", "ci_low"] == pytest.approx(0.15) and mmr.loc[
        "interaction", "ci_high"
    ] == pytest.approx(0.15)
    assert mmr.loc["interaction", "p_value"] == pytest.approx(2 / 200)
    assert (out["n"] == 12).all()
    levels = out[out["kind"] == "level"]
    assert levels["p_holm"].to_numpy() == pytest.approx(multipletests(levels["p_value"], method="holm")[1])
    interactions = out[out["kind"] == "interaction"]
    assert len(interactions) == 2
    assert interactions["p_holm"].to_numpy() == pytest.approx(multipletests(interactions["p_value"], method="holm")[1])


def test_operating_point_labels():
    rows = pd.DataFrame(
        {
            "div": ["knn", "mmr", "mmr", "rule", "rule"],
            "cfg.diversifier.lambda_": [np.nan, 0.3, 0.7, np.nan, np.nan],
            "cfg.diversifier.inner.lambda_": [np.nan, np.nan, np.nan, 0.5, 1.0],
        }
    )
    labels = operating_points(rows, "div", ["cfg.diversifier.lambda_", "cfg.diversifier.inner.lambda_"])
    assert labels.tolist() == ["default", "lambda_=0.3", "lambda_=0.7", "inner.lambda_=0.5", "inner.lambda_=1"]


def test_diversity_study_reports_on_test_queries_only():
    questions = [f"q{i:02d}" for i in range(25)]
    entries = [
        (m, p, lv, off)
        for lv in (0.0, 0.3)
        for m, p, off in (("knn", "default", -0.3 * lv), ("mmr", "a", -0.02), ("mmr", "b", -0.05 - 0.1 * lv))
    ]
    frame = score_frame(entries, questions)
    frame["pool_redundancy"] = frame["level"] * 2
    study = diversity_study(frame, val_fraction=0.2, n_resamples=99, seed=1, redundancy_column="pool_redundancy")
    assert len(study.validation_ids) == 5 and set(study.validation_ids).isdisjoint(study.test_ids)
    assert study.chosen == {"knn": "default", "mmr": "a"}
    assert (study.means["n"] == 20).all()
    table = study.level_table()
    assert table.loc["mmr", 0.3] - table.loc["knn", 0.3] == pytest.approx(0.07)
    assert study.redundancy.to_dict() == pytest.approx({0.0: 0.0, 0.3: 0.6})
    assert study.regret is not None and study.downside is not None
    with pytest.raises(ValueError, match="reference"):
        diversity_study(frame, reference="dpp")


def test_level_contrasts_give_the_sd_and_mde_of_per_query_differences():
    questions = [f"q{i}" for i in range(10)]
    frame = score_frame([("knn", "default", 0.0, 0.0), ("mmr", "l", 0.0, 0.0)], questions)
    # mmr - knn on query i: i / 100 at seed 1 and i / 50 at seed 2, so 1.5 i / 100 once averaged over seeds.
    mmr = frame["method"] == "mmr"
    frame.loc[mmr, "value"] += [
        int(q[1:]) / (100 if s == 1 else 50)
        for q, s in zip(frame.loc[mmr, "question"], frame.loc[mmr, "seed"], strict=True)
    ]
    out = level_contrasts(frame, {"knn": "default", "mmr": "l"}, n_resamples=99, seed=0).iloc[0]
    per_query = 1.5 * np.arange(10) / 100
    assert out["sd"] == pytest.approx(np.std(per_query, ddof=1))
    assert out["mde"] == pytest.approx(minimum_detectable_effect(np.std(per_query, ddof=1), 10))
