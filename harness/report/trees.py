"""Summary-tree sections: answer score by question type per policy, and tree size and build time."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd

from harness.metrics.registry import QASPER_F1
from harness.report.formatting import ReportTable, fmt
from harness.report.load import Layout
from harness.report.tables import Options
from harness.stats.bootstrap import bootstrap_mean_ci


def score_by_question_type_table(rows: pd.DataFrame, layout: Layout, options: Options) -> ReportTable | None:
    """Mean score per question type and policy (QASPER: extractive / abstractive / yes-no / unanswerable)."""
    metric = QASPER_F1 if QASPER_F1 in rows and rows[QASPER_F1].notna().any() else options.metric
    if "qtype" not in rows or rows["qtype"].nunique() < 2 or metric not in rows:
        return None
    type_column = "qasper_answer_type" if metric == QASPER_F1 and "qasper_answer_type" in rows else "qtype"
    records = []
    for (policy, qtype), group in rows.groupby(["policy", type_column], sort=True):
        mean, low, high = bootstrap_mean_ci(
            group[metric].to_numpy(float), n_resamples=min(options.n_resamples, 2000), seed=options.seed
        )
        records.append(
            {"policy": policy, "question_type": qtype, "n": len(group), "mean": mean, "ci_low": low, "ci_high": high}
        )
    data = pd.DataFrame(records)
    display = data.pivot(index="question_type", columns="policy", values="mean").map(fmt).reset_index()
    counts = data.groupby("question_type")["n"].max()
    display.insert(1, "n", display["question_type"].map(counts))
    return ReportTable(
        "score_by_question_type",
        f"{metric} by question type",
        data,
        display,
        note=f"Mean {metric} per question type (rows pooled over seeds); CIs in the CSV.",
    )


def relative_change(value: float, reference: float, quantity: str, smaller: str) -> str:
    """``value`` against ``reference`` in words: "80.0% fewer summary nodes", "13.0% more build time"."""
    change = value / reference - 1 if reference else math.nan
    if not math.isfinite(change):
        return f"{quantity} not comparable"
    return f"{abs(change):.1%} {'more' if change > 0 else smaller} {quantity}"


def tree_cost_table(rows: pd.DataFrame, layout: Layout, options: Options) -> ReportTable | None:
    """Summary nodes and construction time per question for each tree (building excludes preprocessing)."""
    if "tree.summary_nodes" not in rows or rows["tree.summary_nodes"].notna().sum() == 0:
        return None
    built = rows[rows["tree.summary_nodes"].notna()]
    records = []
    for tree, group in built.groupby("tree"):
        layers = [json.loads(v) for v in group["tree.nodes_per_layer"].dropna()]
        depth = max((len(layer) for layer in layers), default=0)
        per_layer = [float(np.mean([layer[i] if i < len(layer) else 0 for layer in layers])) for i in range(depth)]
        fresh = group[~group["tree.cached"].astype(bool)] if "tree.cached" in group else group
        records.append(
            {
                "tree": tree,
                "questions": len(group),
                "with_summaries": int((group["tree.summary_nodes"] > 0).sum()),
                "summary_nodes_mean": float(group["tree.summary_nodes"].mean()),
                "nodes_per_layer_mean": json.dumps([round(v, 1) for v in per_layer]),
                "build_s_mean_fresh": float(fresh["tree.build_seconds"].mean()) if len(fresh) else float("nan"),
                "fresh_builds": len(fresh),
            }
        )
    data = pd.DataFrame(records)
    if len(data) >= 2 and {"raptor", "dtcrs"} <= set(data["tree"]):
        raptor, dtcrs = (data.set_index("tree").loc[name] for name in ("raptor", "dtcrs"))
        nodes = relative_change(dtcrs.summary_nodes_mean, raptor.summary_nodes_mean, "summary nodes", "fewer")
        seconds = relative_change(dtcrs.build_s_mean_fresh, raptor.build_s_mean_fresh, "build time", "less")
        note = (
            f"DTCRS vs RAPTOR: {nodes}, {seconds} per question (fresh builds only; RAPTOR builds once per "
            "document and DTCRS once per question)."
        )
    else:
        note = "Build time over fresh (uncached) builds only."
    display = data.copy()
    for column in ("summary_nodes_mean", "build_s_mean_fresh"):
        display[column] = display[column].map(fmt)
    return ReportTable("tree_cost", "Summary trees: nodes and build time", data, display, note=note)


def tree_tables(rows: pd.DataFrame, layout: Layout, options: Options) -> list[ReportTable]:
    return [
        t for t in (score_by_question_type_table(rows, layout, options), tree_cost_table(rows, layout, options)) if t
    ]
