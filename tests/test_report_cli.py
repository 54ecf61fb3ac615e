"""End to end: synthetic result rows written as fake run and sweep directories, analysed by the report CLI."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from PIL import Image

from harness.report.cli import main
from tests.helpers.report_rows import diversity_rows, packing_rows, write_sweep

FAST = ["--resamples", "200", "--study-resamples", "199", "--quiet"]
READERS = ("tiny-135m", "big-7b")


def packing_sweep(root: Path, n_questions: int = 30) -> Path:
    frames = [
        packing_rows(n_questions, packer, budget, seed, reader)
        for packer in ("packed", "submod")
        for budget in (64, 128)
        for seed in (42, 13)
        for reader in READERS
    ]
    return write_sweep(root, frames, failed=1)


def diversity_sweep(root: Path, n_questions: int = 30) -> Path:
    frames = []
    for rho in (0.0, 0.2, 0.4):
        for seed in (42, 13):
            frames.append(diversity_rows(n_questions, "knn", None, rho, seed))
            for lam in (0.3, 0.7):
                frames.append(diversity_rows(n_questions, "mmr", lam, rho, seed))
                frames.append(diversity_rows(n_questions, "rule", lam, rho, seed))
    return write_sweep(root, frames)


def assert_png(path: Path) -> None:
    assert path.is_file(), path
    assert path.stat().st_size > 10_000, f"{path} is suspiciously small"
    with Image.open(path) as image:
        image.verify()
    with Image.open(path) as image:
        assert image.format == "PNG"
        assert image.size[0] >= 600 and image.size[1] >= 400


def test_packing_sweep_report(tmp_path, caplog):
    sweep = packing_sweep(tmp_path / "multirun" / "14-00-00")
    with caplog.at_level(logging.WARNING):
        assert main([str(sweep), *FAST]) == 0
    assert any("error.txt" in message for message in caplog.messages)  # the failed job is named, then skipped
    out = sweep / "report"
    for name in (
        "runs",
        "policy_table",
        "diagnostic_validity",
        "score_by_answer_in_context",
        "incremental_validity",
        "retrieval_perfect",
        "contrasts",
        "contrast_decomposition",
        "oracle_headroom",
    ):
        assert (out / f"{name}.csv").is_file(), name
    for name in ("budget_curves.png", "reader_ladder.png"):
        assert_png(out / name)
    assert not list(out.glob("diversity*"))  # no diversifier variation: no diversity study

    policy = pd.read_csv(out / "policy_table.csv")
    assert len(policy) == 2 * 2 * 2  # packer x reader x budget, seeds pooled
    assert set(policy["n_questions"]) == {30} and set(policy["n_seeds"]) == {2}
    assert (policy["f1_ci_low"] <= policy["f1"]).all() and (policy["f1"] <= policy["f1_ci_high"]).all()

    contrasts = pd.read_csv(out / "contrasts.csv")
    assert len(contrasts) == 2 * 2  # submod vs packed, per reader and budget
    assert set(contrasts["baseline"].str.contains("packer=packed")) == {True}
    assert np.allclose(contrasts["mean_diff"], 0.1)
    assert np.allclose(contrasts["ci_low"], 0.1) and np.allclose(contrasts["ci_high"], 0.1)
    assert (contrasts["n"] == 30).all() and (contrasts["n_pairs"] == 60).all()
    assert (contrasts["p_holm"] >= contrasts["p_value"]).all()

    decomposition = pd.read_csv(out / "contrast_decomposition.csv")
    parts = decomposition[["from_entered", "from_left", "from_others"]].sum(axis=1)
    assert np.allclose(parts, decomposition["mean_diff"])
    assert (decomposition["n_left"] == 0).all()  # submod's context never loses the answer here

    oracle = pd.read_csv(out / "oracle_headroom.csv")
    assert (oracle["best_policy"].str.contains("submod")).all()
    assert np.allclose(oracle["headroom"], 0.0)  # submod dominates on every question: no headroom

    markdown = (out / "report.md").read_text()
    for title in (
        "Policies by budget",
        "Diagnostic validity",
        "Incremental validity",
        "Retrieval-perfect subset",
        "Paired contrasts",
        "Oracle headroom",
        "budget_curves.png",
    ):
        assert title in markdown


def test_answer_in_context_equal_to_f1(tmp_path):
    # F1 = answer-in-context exactly, recall@k only partly related: correlation 1 and a clear ΔR² > 0.
    rng = np.random.default_rng(3)
    frames = []
    for seed in (1, 2):
        frame = packing_rows(60, "packed", 96, seed, "tiny-135m")
        frame["answer_in_context"] = (rng.uniform(size=60) < 0.3 + 0.5 * (frame["recall_at_k"] == 1)).astype(float)
        frame["f1"] = frame["answer_in_context"]
        frames.append(frame)
    run = write_sweep(tmp_path / "sweep", frames)
    assert main([str(run), "--out", str(tmp_path / "out"), *FAST]) == 0
    validity = pd.read_csv(tmp_path / "out" / "diagnostic_validity.csv").set_index("diagnostic")
    assert validity.loc["answer_in_context", "pearson_f1"] == pytest.approx(1.0)
    assert validity.loc["answer_in_context", "spearman_f1"] == pytest.approx(1.0)
    incremental = pd.read_csv(tmp_path / "out" / "incremental_validity.csv").iloc[0]
    assert incremental["r2_full"] == pytest.approx(1.0)
    assert incremental["delta_r2"] > 0.3 and incremental["delta_r2_ci_low"] > 0
    assert incremental["partial_corr"] == pytest.approx(1.0)


def test_diversity_sweep_report(tmp_path):
    sweep = diversity_sweep(tmp_path / "div")
    assert main([str(sweep), *FAST, "--seed", "5"]) == 0
    out = sweep / "report"
    for name in (
        "diversity_operating_points",
        "diversity_s_recall",
        "diversity_oracles",
        "diversity_robustness",
        "diversity_contrasts",
    ):
        assert (out / f"{name}.csv").is_file(), name
    plots = list(out.glob("diversity_*.png"))
    assert len(plots) == 1
    assert_png(plots[0])

    tuning = pd.read_csv(out / "diversity_operating_points.csv")
    chosen = dict(tuning.loc[tuning["chosen"], ["method", "point"]].itertuples(index=False, name=None))
    # validation mean over the three levels of the offsets: lambda 0.3 wins for mmr and for the rule
    assert chosen == {"knn": "default", "mmr": "lambda_=0.3", "rule": "inner.lambda_=0.3"}
    assert set(tuning["n_val_queries"]) == {6}  # 20% of 30 questions

    robustness = pd.read_csv(out / "diversity_robustness.csv").set_index("method")
    # regret per level (clean, 0.2, 0.4): knn (0, .06, .14), mmr (.02, 0, 0), rule (0, 0, 0)
    assert robustness.loc["knn", "max_regret"] == pytest.approx(0.14)
    assert robustness.loc["mmr", "max_regret"] == pytest.approx(0.02)
    assert robustness.loc["rule", "max_regret"] == pytest.approx(0.0, abs=1e-12)
    assert robustness["minimax"].to_dict() == {"knn": False, "mmr": False, "rule": True}
    assert robustness.loc["mmr", "downside"] == pytest.approx(0.02)  # loses 0.02 to knn on clean pools

    contrasts = pd.read_csv(out / "diversity_contrasts.csv")
    interaction = contrasts[contrasts["kind"] == "interaction"].set_index("method")
    # (mmr - knn) at rho 0.4 minus at clean: (-0.06 + 0.2) - (-0.02) = 0.16
    assert interaction.loc["mmr", "mean_diff"] == pytest.approx(0.16)
    assert (contrasts["n"] == 24).all()  # test questions only

    table = pd.read_csv(out / "diversity_s_recall.csv").set_index("row")
    assert table.loc["measured redundancy"].to_numpy() == pytest.approx([0.05, 0.21, 0.37])
    assert table.loc["rule trigger rate"].to_numpy() == pytest.approx([0.0, 1.0, 1.0])


def test_several_directories_share_a_report(tmp_path):
    # two single runs, one per packer, given side by side: the report lands in their common parent
    for packer in ("packed", "submod"):
        run = tmp_path / "runs" / packer
        run.mkdir(parents=True)
        packing_rows(12, packer, 96, 42, "tiny-135m").to_parquet(run / "rows.parquet")
    assert main([str(tmp_path / "runs" / "packed"), str(tmp_path / "runs" / "submod"), *FAST, "--no-plots"]) == 0
    out = tmp_path / "runs" / "report"
    assert len(pd.read_csv(out / "runs.csv")) == 2
    contrast = pd.read_csv(out / "contrasts.csv")
    assert contrast["mean_diff"].to_numpy() == pytest.approx([0.1]) and contrast["n"].tolist() == [12]
    assert (out / "report.md").is_file() and not list(out.glob("*.png"))


def test_single_run_directory_and_errors(tmp_path, capsys):
    run = tmp_path / "run"
    run.mkdir()
    packing_rows(10, "packed", 96, 42, "tiny-135m").to_parquet(run / "rows.parquet")
    assert main([str(run), *FAST]) == 0
    policy = pd.read_csv(run / "report" / "policy_table.csv")
    assert len(policy) == 1 and policy["policy"].iloc[0] == "tree=none, diversifier=knn, packer=packed"
    assert not (run / "report" / "contrasts.csv").exists()  # nothing varies: no contrasts, no oracle
    assert not (run / "report" / "oracle_headroom.csv").exists()

    assert main([str(tmp_path / "missing"), *FAST]) == 2
    assert "not a directory" in capsys.readouterr().err
    sweep = packing_sweep(tmp_path / "sweep", n_questions=6)
    assert main([str(sweep), "--baseline", "nonexistent", *FAST]) == 2
    assert "nonexistent" in capsys.readouterr().err
    assert main([str(sweep), "--metric", "bleu", *FAST]) == 2
    assert "bleu" in capsys.readouterr().err

    # printed to the terminal unless --quiet
    assert main([str(sweep), "--resamples", "50", "--no-plots", "--baseline", "packer=packed"]) == 0
    printed = capsys.readouterr().out
    assert "Paired contrasts" in printed and "Policies by budget" in printed
    with pytest.raises(SystemExit) as exit_info:
        main(["--help"])
    assert exit_info.value.code == 0
    assert "--resamples" in capsys.readouterr().out


def test_every_table_states_the_mmr_lambda(tmp_path):
    from harness.report.tables import mmr_footnote

    sweep = diversity_sweep(tmp_path / "div", n_questions=10)
    assert main([str(sweep), *FAST, "--no-plots"]) == 0
    markdown = (sweep / "report" / "report.md").read_text()
    line = (
        "MMR λ: diversifier=mmr λ = 0.3, 0.7; rule's inner MMR λ = 0.3, 0.7 (harness default 0.7: 1 = relevance only)."
    )
    tables = markdown.count("\n## ")
    assert tables >= 5 and markdown.count(line) == tables

    packed = packing_rows(5, "packed", 128, 42, "tiny-135m")
    assert mmr_footnote(packed) == ""  # no MMR stage, nothing to state
    mmr = packing_rows(5, "mmr", 128, 42, "tiny-135m").assign(**{"cfg.packer.relevance_weight": 0.7})
    assert (
        mmr_footnote(pd.concat([packed, mmr])) == "MMR λ: packer=mmr λ = 0.7 (harness default 0.7: 1 = relevance only)."
    )


def test_a_predictor_as_the_metric_skips_incremental_validity(tmp_path):
    # Selection-only sweeps are often reported on answer-in-context itself: the report must not regress it on
    # itself (its column was once selected twice, and statsmodels failed on the 2-D column).
    frames = [packing_rows(30, packer, 96, 1, "tiny-135m") for packer in ("packed", "submod")]
    for frame in frames:
        frame[["em", "f1"]] = np.nan
    run = write_sweep(tmp_path / "sweep", frames)
    assert main([str(run), "--out", str(tmp_path / "out"), "--metric", "answer_in_context", *FAST]) == 0
    assert (tmp_path / "out" / "policy_table.csv").exists()
    assert not (tmp_path / "out" / "incremental_validity.csv").exists()


def test_incremental_validity_of_an_outcome_that_is_also_the_added_predictor():
    from harness.stats.analyses import incremental_validity

    rng = np.random.default_rng(0)
    rows = pd.DataFrame(
        {"aic": rng.integers(0, 2, 80).astype(float), "recall": rng.uniform(size=80), "q": np.repeat(np.arange(40), 2)}
    )
    result = incremental_validity(rows, outcome="aic", base="recall", added="aic", cluster="q", n_resamples=50)
    assert result["r2_full"] == pytest.approx(1.0)
