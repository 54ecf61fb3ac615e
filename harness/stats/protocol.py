"""The diversity-study protocol: tune on validation queries, report on test queries only.

Question ids are split once (seeded) into a validation and a test part. Each method's operating point
(its hyper-parameter value: lambda for mmr, gamma for rng, tau / inner for the rule, ...) is the argmax of
mean validation S-Recall; every reported figure is on test queries at that point. Besides per-level
means it gives per-query oracles, the misspecification downside and minimax regret across perturbation
levels, and query-clustered bootstrap contrasts against kNN with Holm adjustment, whose primary test is
the heavy-minus-clean interaction.

Input throughout is a long frame of scores with columns ``method, point, level, question, seed, value``
(one row per run row); seeds are averaged within a query before anything is compared.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from harness.stats.analyses import holm_adjust
from harness.stats.bootstrap import bootstrap_mean_ci, bootstrap_p_value, clustered_bootstrap, percentile_interval
from harness.stats.power import minimum_detectable_effect

SCORE_COLUMNS = ("method", "point", "level", "question", "seed", "value")
DEFAULT_POINT = "default"


def split_questions(question_ids: Any, val_fraction: float = 0.2, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """(validation ids, test ids): a seeded split of the distinct ids, about ``val_fraction`` for validation.

    The split depends only on the set of ids and the seed (ids are sorted before shuffling), so the same
    questions land in the same part however the rows are ordered. Both parts get at least one id.
    """
    if not 0.0 < val_fraction < 1.0:
        raise ValueError(f"val_fraction must lie strictly between 0 and 1, got {val_fraction!r}")
    unique = np.array(sorted(pd.unique(pd.Series(list(question_ids), dtype=object)), key=str), dtype=object)
    if unique.size < 2:
        raise ValueError(f"a validation/test split needs at least 2 distinct questions, got {unique.size}")
    n_val = min(max(math.floor(val_fraction * unique.size + 0.5), 1), unique.size - 1)  # half up
    order = np.random.default_rng(seed).permutation(unique.size)
    return np.sort(unique[order[:n_val]]), np.sort(unique[order[n_val:]])


def format_parameter(value: Any) -> str:
    """A compact, unambiguous rendering of one parameter value (1.0 -> '1', 0.1 -> '0.1', missing -> '-')."""
    if value is None or (isinstance(value, (float, np.floating)) and math.isnan(value)):
        return "-"
    if isinstance(value, (float, np.floating)):
        return str(int(value)) if float(value).is_integer() else repr(float(value))
    return str(value)


def parameter_name(column: str) -> str:
    """``cfg.diversifier.inner.lambda_`` -> ``inner.lambda_``: the key below the component group."""
    parts = column.split(".")
    return ".".join(parts[2:]) if parts[0] == "cfg" and len(parts) > 2 else column


def operating_points(rows: pd.DataFrame, method_column: str, parameter_columns: Sequence[str]) -> pd.Series:
    """Per row, the label of its method's operating point: the parameters that vary within that method.

    A method run at a single setting gets ``'default'``. Labels read ``lambda_=0.3`` or ``h=2, inner.name=dpp``.
    """
    labels = pd.Series(DEFAULT_POINT, index=rows.index, dtype=object)
    for _, group in rows.groupby(method_column, sort=False):
        varying = [c for c in parameter_columns if group[c].map(format_parameter).nunique() > 1]
        if varying:
            labels.loc[group.index] = [
                ", ".join(f"{parameter_name(c)}={format_parameter(v)}" for c, v in zip(varying, values, strict=False))
                for values in zip(*(group[c] for c in varying), strict=False)
            ]
    return labels


def _check_scores(scores: pd.DataFrame) -> None:
    missing = [c for c in SCORE_COLUMNS if c not in scores.columns]
    if missing:
        raise KeyError(f"score frame lacks columns {missing}; expected {list(SCORE_COLUMNS)}")


def query_means(scores: pd.DataFrame, value: str = "value") -> pd.Series:
    """Seed-averaged value per (method, point, level, question)."""
    return scores.groupby(["method", "point", "level", "question"], sort=True)[value].mean().dropna()


def tune_operating_points(scores: pd.DataFrame, validation_ids: Any, tune_level: Any = None) -> pd.DataFrame:
    """Each (method, point)'s validation score and whether it is the method's chosen point.

    The score is the mean over levels of the mean over validation queries (seeds averaged), so every level
    weighs the same; with ``tune_level`` only that level counts. The chosen point is the argmax (ties: the
    first point in sorted order).
    """
    _check_scores(scores)
    validation = scores[scores["question"].isin(set(validation_ids))]
    if tune_level is not None:
        validation = validation[validation["level"] == tune_level]
        if validation.empty:
            raise ValueError(f"tune_level {tune_level!r} is not a level of the scores")
    if validation.empty:
        raise ValueError("no score rows for the validation questions")
    per_query = query_means(validation)
    per_level = per_query.groupby(["method", "point", "level"]).mean()
    table = per_level.groupby(["method", "point"]).mean().rename("val_score").reset_index()
    counts = per_query.reset_index().groupby(["method", "point"])["question"].nunique()
    table["n_val_queries"] = counts.to_numpy()
    chosen = table.groupby("method")["val_score"].idxmax()
    table["chosen"] = table.index.isin(chosen.to_numpy())
    return table


def chosen_points(tuning: pd.DataFrame) -> dict[Any, str]:
    return dict(tuning.loc[tuning["chosen"], ["method", "point"]].itertuples(index=False, name=None))


def at_chosen(scores: pd.DataFrame, chosen: dict[Any, str]) -> pd.DataFrame:
    """Score rows of each method at its chosen point only."""
    return scores[scores["point"] == scores["method"].map(chosen)]


def level_means(
    scores: pd.DataFrame, chosen: dict[Any, str], n_resamples: int = 1999, confidence: float = 0.95, seed: int = 0
) -> pd.DataFrame:
    """Mean score per (method, level) at the chosen points with a bootstrap interval over queries."""
    per_query = query_means(at_chosen(scores, chosen))
    records = []
    for (method, level), values in per_query.groupby(["method", "level"]):
        mean, low, high = bootstrap_mean_ci(values.to_numpy(float), n_resamples, confidence, seed)
        records.append(
            {"method": method, "level": level, "mean": mean, "ci_low": low, "ci_high": high, "n": int(values.size)}
        )
    return pd.DataFrame(records, columns=["method", "level", "mean", "ci_low", "ci_high", "n"])


def per_query_oracles(scores: pd.DataFrame, chosen: dict[Any, str], reference: str = "knn") -> pd.DataFrame:
    """Per level: each method's per-query oracle (best of its operating points for each query) and the
    all-methods oracle (best of every method and point, the reference included), with the share of queries
    where the oracle beats the reference at its chosen point."""
    if reference not in chosen:
        raise ValueError(f"reference method {reference!r} is not among the methods {sorted(chosen)}")
    per_query = query_means(scores)
    records = []
    for level, at_level in per_query.groupby(level="level"):
        wide = at_level.droplevel("level").unstack("question").T  # questions x (method, point)
        if (reference, chosen[reference]) not in wide.columns:
            continue
        ref = wide[(reference, chosen[reference])]
        candidates = {
            method: wide.loc[:, [c for c in wide.columns if c[0] == method]] for method in chosen if method != reference
        }
        candidates["all methods"] = wide
        for method, block in candidates.items():
            if block.shape[1] == 0:
                continue
            oracle = block.max(axis=1, skipna=True)
            keep = oracle.notna() & ref.notna()
            if not keep.any():
                continue
            tuned = (
                wide[(method, chosen[method])][keep].mean()
                if method in chosen and (method, chosen[method]) in wide.columns
                else math.nan
            )
            records.append(
                {
                    "method": method,
                    "level": level,
                    "oracle_mean": float(oracle[keep].mean()),
                    "tuned_mean": float(tuned),
                    "reference_mean": float(ref[keep].mean()),
                    "share_improved": float((oracle[keep] > ref[keep]).mean()),
                    "n": int(keep.sum()),
                }
            )
    return pd.DataFrame(
        records, columns=["method", "level", "oracle_mean", "tuned_mean", "reference_mean", "share_improved", "n"]
    )


def misspecification_downside(table: pd.DataFrame, reference: str = "knn") -> pd.DataFrame:
    """Per method: its loss against the reference (reference minus method) at every level of ``table``
    (methods x levels, tuned test means), the largest such loss over levels (the downside) and where it
    falls, and the loss at the heaviest level (last column)."""
    if reference not in table.index:
        raise ValueError(f"reference method {reference!r} is not a row of the table ({list(table.index)})")
    loss = (table.loc[[reference]].to_numpy() - table.drop(index=reference)).dropna(how="all")
    out = pd.DataFrame(
        {
            "downside": loss.max(axis=1),
            "worst_level": loss.idxmax(axis=1),
            "loss_at_heaviest": loss.iloc[:, -1],
        }
    )
    out.index.name = "method"
    return out.reset_index()


def minimax_regret(table: pd.DataFrame) -> pd.DataFrame:
    """Regret of each method (row) at each level (column): the best method's value there minus its own;
    its maximum over levels; and which method minimises that maximum (ties: all of them are marked)."""
    if table.empty or table.isna().all().all():
        raise ValueError("minimax regret needs a methods x levels table with values")
    regret = table.max(axis=0) - table
    out = regret.copy()
    out.columns = [f"regret@{c}" for c in table.columns]
    out["max_regret"] = regret.max(axis=1)
    out["minimax"] = np.isclose(out["max_regret"], out["max_regret"].min())
    out.index.name = "method"
    return out.reset_index()


def regret_power(scores: pd.DataFrame, chosen: dict[Any, str], table: pd.DataFrame) -> pd.DataFrame:
    """Behind each method's largest regret (``minimax_regret``): the level, the best method there, and the
    power of the paired per-query difference between the two at that level (queries with both, seeds
    averaged): ``n``, its SD and the minimum detectable effect (α = 0.05, 80% power). A method that is
    the best at its worst level has no regret to test (NaN)."""
    per_query = query_means(at_chosen(scores, chosen)).droplevel("point")
    regret = table.max(axis=0) - table
    records = []
    for method in table.index:
        level = regret.loc[method].idxmax()
        best = table[level].idxmax()
        record = {"method": method, "regret_level": level, "regret_vs": best, "regret_n": 0}
        record.update(regret_sd=math.nan, regret_mde=math.nan)
        if best != method:
            pair = pd.concat(
                {
                    side: per_query.xs((name, level), level=("method", "level"))
                    for side, name in (("a", method), ("b", best))
                },
                axis=1,
            ).dropna()
            differences = (pair["a"] - pair["b"]).to_numpy(dtype=float)
            if differences.size >= 2:
                sd = float(np.std(differences, ddof=1))
                record.update(
                    regret_n=int(differences.size),
                    regret_sd=sd,
                    regret_mde=minimum_detectable_effect(sd, differences.size),
                )
        records.append(record)
    return pd.DataFrame(records)


def level_contrasts(
    scores: pd.DataFrame,
    chosen: dict[Any, str],
    reference: str = "knn",
    n_resamples: int = 1999,
    confidence: float = 0.95,
    seed: int = 0,
) -> pd.DataFrame:
    """Each method minus the reference per level, and the heavy-minus-clean interaction
    ((method - reference) at the heaviest level minus at the lightest), at chosen points.

    Rows are matched on (question, seed) and averaged over seeds within a query; whole queries are
    resampled (all their levels together, which keeps the interaction's two terms paired). Holm adjustment
    runs over all (method, level) contrasts, and separately over the interactions, the primary test.
    """
    levels = sorted(scores["level"].unique())
    ref_rows = scores[(scores["method"] == reference) & (scores["point"] == chosen.get(reference))]
    if ref_rows.empty:
        raise ValueError(f"no rows for the reference method {reference!r}")
    records = []
    for method in sorted((m for m in chosen if m != reference), key=str):
        rows = scores[(scores["method"] == method) & (scores["point"] == chosen[method])]
        merged = rows.merge(ref_rows, on=["level", "question", "seed"], suffixes=("", "_ref"))
        merged["diff"] = merged["value"] - merged["value_ref"]
        wide = merged.groupby(["question", "level"])["diff"].mean().unstack("level").reindex(columns=levels)
        wide = wide.dropna(how="all")
        if wide.empty:
            continue
        names = [f"{level!r}" for level in levels]
        values = wide.to_numpy(float)
        if len(levels) > 1:
            values = np.column_stack([values, values[:, -1] - values[:, 0]])
            names.append("interaction")
        draws = clustered_bootstrap(values, wide.index.to_numpy(), "mean", n_resamples, seed)
        for j, name in enumerate(names):
            column = values[:, j]
            present = ~np.isnan(column)
            low, high = percentile_interval(draws[:, j], confidence)
            sd = float(np.std(column[present], ddof=1)) if present.sum() >= 2 else math.nan
            records.append(
                {
                    "method": method,
                    "level": levels[j] if name != "interaction" else "heavy-clean",
                    "kind": "interaction" if name == "interaction" else "level",
                    "mean_diff": float(column[present].mean()) if present.any() else math.nan,
                    "ci_low": low,
                    "ci_high": high,
                    "p_value": bootstrap_p_value(draws[:, j]) if present.any() else math.nan,
                    "n": int(present.sum()),
                    "sd": sd,
                    "mde": minimum_detectable_effect(sd, int(present.sum())),
                }
            )
    columns = ["method", "level", "kind", "mean_diff", "ci_low", "ci_high", "p_value", "n", "sd", "mde"]
    out = pd.DataFrame(records, columns=columns)
    out["p_holm"] = np.nan
    for kind in ("level", "interaction"):
        mask = out["kind"] == kind
        if mask.any():
            out.loc[mask, "p_holm"] = holm_adjust(out.loc[mask, "p_value"].to_numpy(float))
    return out


@dataclass
class DiversityStudy:
    """Every table of one diversity study (levels in ascending order, test queries only unless noted)."""

    validation_ids: np.ndarray
    test_ids: np.ndarray
    tuning: pd.DataFrame  # method, point, val_score, n_val_queries, chosen (validation)
    means: pd.DataFrame  # method, level, mean, ci_low, ci_high, n
    oracles: pd.DataFrame  # method, level, oracle_mean, tuned_mean, reference_mean, share_improved, n
    contrasts: pd.DataFrame  # method, level, kind, mean_diff, ci_low, ci_high, p_value, n, sd, mde, p_holm
    downside: pd.DataFrame | None  # per method (None with a single level)
    regret: pd.DataFrame | None  # per method (None with a single level), with regret_power's columns
    redundancy: pd.Series | None = None  # mean measured pool redundancy per level
    trigger_rate: pd.DataFrame = field(default_factory=pd.DataFrame)  # method x level, for methods that report it
    reference: str = "knn"

    @property
    def chosen(self) -> dict[Any, str]:
        return chosen_points(self.tuning)

    def level_table(self) -> pd.DataFrame:
        """Methods x levels of tuned test means."""
        return self.means.pivot(index="method", columns="level", values="mean")


def _level_rate(frame: pd.DataFrame, column: str) -> pd.Series:
    per_query = frame.groupby(["level", "question"])[column].mean()
    return per_query.groupby(level="level").mean()


def diversity_study(
    scores: pd.DataFrame,
    reference: str = "knn",
    val_fraction: float = 0.2,
    n_resamples: int = 1999,
    confidence: float = 0.95,
    seed: int = 0,
    tune_level: Any = None,
    redundancy_column: str | None = None,
    trigger_column: str | None = None,
) -> DiversityStudy:
    """Run the whole protocol on a score frame (see the module docstring). Optional columns of ``scores``
    named by ``redundancy_column`` (measured pool redundancy) and ``trigger_column`` (whether a rule fired)
    are summarised per level on test queries."""
    _check_scores(scores)
    scores = scores.dropna(subset=["value"])
    if reference not in set(scores["method"]):
        raise ValueError(f"reference method {reference!r} has no scores (methods: {sorted(set(scores['method']))})")
    validation_ids, test_ids = split_questions(scores["question"], val_fraction, seed)
    tuning = tune_operating_points(scores, validation_ids, tune_level)
    chosen = chosen_points(tuning)
    test = scores[scores["question"].isin(set(test_ids))]
    means = level_means(test, chosen, n_resamples, confidence, seed)
    table = means.pivot(index="method", columns="level", values="mean")
    several_levels = table.shape[1] > 1 and reference in table.index
    redundancy = None
    if redundancy_column and redundancy_column in test.columns and test[redundancy_column].notna().any():
        # The pool is the same for every method: average per query first so methods do not weigh it.
        redundancy = _level_rate(test.dropna(subset=[redundancy_column]), redundancy_column)
    trigger = pd.DataFrame()
    if trigger_column and trigger_column in test.columns:
        fired = at_chosen(test, chosen).dropna(subset=[trigger_column])
        if not fired.empty:
            trigger = pd.DataFrame(
                {method: _level_rate(group, trigger_column) for method, group in fired.groupby("method")}
            ).T
    return DiversityStudy(
        validation_ids=validation_ids,
        test_ids=test_ids,
        tuning=tuning,
        means=means,
        oracles=per_query_oracles(test, chosen, reference),
        contrasts=level_contrasts(test, chosen, reference, n_resamples, confidence, seed),
        downside=misspecification_downside(table, reference) if several_levels else None,
        regret=minimax_regret(table).merge(regret_power(test, chosen, table), on="method") if several_levels else None,
        redundancy=redundancy,
        trigger_rate=trigger,
        reference=reference,
    )
