"""Seed 002: RAPTOR against the query-driven tree (DTCRS)."""

from __future__ import annotations

import logging
import math
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from harness.report.formatting import fmt
from harness.report.replication.common import (
    SEED002_BUILD_TIME_CHANGE,
    TREES,
    Section,
    Settings,
    _load,
    _missing,
    _save,
    verdict,
)
from harness.stats.power import mde_from_standard_error

log = logging.getLogger("harness.report.replication")

# ----------------------------------------------------------------------------------------------------------
# seed 002: summary trees


def trees_section(settings: Settings) -> Section:
    section = Section("Seed 002: RAPTOR vs the query-driven tree (DTCRS): nodes and build time")
    rows = _load(settings, TREES)
    if rows is None:
        return _missing(section, TREES)
    section.add(
        "Claim: the query-driven tree builds fewer nodes and cuts construction time by 81% against RAPTOR. "
        "Both trees summarise with the same GGUF model through llama.cpp; LM calls and prompt tokens are those "
        "sent to the model (cold caches). RAPTOR builds one tree per document, shared by its questions; DTCRS "
        "builds one per question, for the questions it classifies as needing one. Totals are per dataset.",
    )
    section.command(TREES.command, "python -m harness.report replicate")
    records, verdicts = [], []
    for dataset in sorted(rows["dataset"].astype(str).unique()):
        at = rows[rows["dataset"] == dataset]
        totals = {}
        for tree in ("raptor", "dtcrs"):
            built = at[(at["tree"] == tree) & at["tree.summary_nodes"].notna()]
            fresh = built[~built["tree.cached"].astype(bool)] if "tree.cached" in built else built
            totals[tree] = fresh
            records.append(
                {
                    "dataset": dataset,
                    "tree": tree,
                    "questions": int(at.loc[at["tree"] == tree, "qkey"].nunique()),
                    "fresh builds": len(fresh),
                    "with summaries": int((fresh["tree.summary_nodes"] > 0).sum()),
                    "summary nodes": int(fresh["tree.summary_nodes"].sum()),
                    "build s": f"{fresh['tree.build_seconds'].sum():.1f}",
                    "s per tree with summaries": fmt(
                        fresh.loc[fresh["tree.summary_nodes"] > 0, "tree.build_seconds"].mean(), digits=1
                    ),
                    "LM calls": int(fresh["tree.lm_calls"].sum()) if "tree.lm_calls" in fresh else "–",
                    "prompt tokens": int(fresh["tree.lm_prompt_tokens"].sum())
                    if "tree.lm_prompt_tokens" in fresh
                    else "–",
                }
            )
        raptor, dtcrs = totals["raptor"], totals["dtcrs"]
        if not (len(raptor) and len(dtcrs)):
            continue
        per_tree = {
            name: frame.loc[frame["tree.summary_nodes"] > 0, "tree.build_seconds"].mean()
            for name, frame in totals.items()
        }
        with_trees = int((dtcrs["tree.summary_nodes"] > 0).sum())
        verdicts.append(
            f"- {dataset}: each RAPTOR tree serves {len(dtcrs) / len(raptor):.1f} of the sampled questions; DTCRS "
            f"built a tree for {with_trees} of {len(dtcrs)} questions; per tree with summaries "
            f"{fmt(per_tree['dtcrs'], digits=1)} s against RAPTOR's {fmt(per_tree['raptor'], digits=1)} s, so "
            + (
                "the saving comes from building fewer trees, not cheaper ones"
                if not per_tree["dtcrs"] < per_tree["raptor"]
                else "its trees are also cheaper one for one"
            )
        )
        for column, quantity, paper, effect in (
            (
                "tree.build_seconds",
                "build time",
                f"{SEED002_BUILD_TIME_CHANGE:+.0%}".replace("-", "−"),
                SEED002_BUILD_TIME_CHANGE,
            ),
            ("tree.summary_nodes", "summary nodes", "fewer", math.nan),
            ("tree.lm_prompt_tokens", "LM prompt tokens", None, math.nan),
        ):
            if column not in dtcrs or dtcrs[column].isna().all():
                continue
            a, b = dtcrs[column].to_numpy(float), raptor[column].to_numpy(float)
            change = a.sum() / b.sum() - 1 if b.sum() else math.nan
            low, high, se = _ratio_ci(a, b, settings)
            mde = mde_from_standard_error(se)
            # Only the build time has a figure in the paper; "fewer nodes" is a direction without a size.
            outcome = verdict(low, high, direction=-1, mde=mde, paper=effect, percent=True)
            figure = f"{change:+.0%} [{low:+.0%}, {high:+.0%}]"
            power = f"{len(a)} DTCRS and {len(b)} RAPTOR builds, MDE {mde:.0%}"
            verdicts.append(
                f"- {dataset}: {quantity} {figure} ({power})" + (f"; paper {paper} → {outcome}" if paper else "")
            )
            if paper:
                section.claim(
                    f"seed 002: DTCRS below RAPTOR on {quantity} ({dataset})",
                    outcome,
                    f"{figure} vs paper {paper}; {power}",
                )
    section.table(pd.DataFrame(records))
    figure = _trees_figure(pd.DataFrame(records), settings)
    section.add("", f"![trees: build time and summary nodes]({settings.relative(figure)})", "")
    section.add(
        "A DTCRS row without summaries is a question its classifier sent to the dense pool (its build time is the "
        "classification). 's per tree with summaries' compares one DTCRS tree (per question) with one RAPTOR "
        "tree (per document): it separates building fewer trees from building cheaper ones.",
        "",
    )
    section.add(
        "DTCRS against RAPTOR, totals over the fresh builds (95% interval from resampling each tree's builds):",
        "",
        *verdicts,
    )
    return section


def _trees_figure(records: pd.DataFrame, settings: Settings) -> Path:
    """Total build seconds and summary nodes per dataset, RAPTOR beside DTCRS."""
    fig = Figure(figsize=(9.0, 3.8))
    datasets = list(dict.fromkeys(records["dataset"]))
    for i, (column, label) in enumerate((("build s", "build seconds (total)"), ("summary nodes", "summary nodes"))):
        axis = fig.add_subplot(1, 2, i + 1)
        for j, tree in enumerate(("raptor", "dtcrs")):
            values = [
                float(records.loc[(records["dataset"] == d) & (records["tree"] == tree), column].iloc[0])
                if ((records["dataset"] == d) & (records["tree"] == tree)).any()
                else 0.0
                for d in datasets
            ]
            axis.bar(np.arange(len(datasets)) + (j - 0.5) * 0.38, values, width=0.38, label=tree.upper())
        axis.set_xticks(range(len(datasets)), datasets)
        axis.set_ylabel(label)
        axis.grid(alpha=0.3, axis="y")
    fig.axes[0].legend(fontsize="small")
    return _save(fig, settings.figures / "trees.png")


def _ratio_ci(a: np.ndarray, b: np.ndarray, settings: Settings) -> tuple[float, float, float]:
    """Percentile interval of sum(a)/sum(b) - 1 from independent resamples of a's and b's builds, and the
    resamples' standard deviation (the standard error behind the minimum detectable effect)."""
    rng = np.random.default_rng(settings.seed)
    n = min(settings.n_resamples, 5000)
    ra = a[rng.integers(0, a.size, size=(n, a.size))].sum(axis=1)
    rb = b[rng.integers(0, b.size, size=(n, b.size))].sum(axis=1)
    ratios = ra / rb - 1
    tail = (1 - settings.confidence) / 2
    return float(np.quantile(ratios, tail)), float(np.quantile(ratios, 1 - tail)), float(np.std(ratios, ddof=1))
