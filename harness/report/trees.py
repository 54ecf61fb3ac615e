"""Summary-tree sections: answer score by question type per policy, tree size and build time, and the DTCRS
question classifier scored against the annotated answer type (confusion matrix, accuracy, the share of
classes the LM's output gave and the share the rules fallback gave, per dataset, classifier and LM)."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd

from harness.metrics.registry import QASPER_F1
from harness.report.common import Options
from harness.report.formatting import ReportTable, fmt
from harness.report.load import Layout, format_value, short_name
from harness.stats.bootstrap import bootstrap_mean_ci


def score_by_question_type_table(rows: pd.DataFrame, layout: Layout, options: Options) -> ReportTable | None:
    """Mean score per question type and policy (QASPER: extractive / abstractive / yes-no / unanswerable), at
    each setting (budget, dataset) of the rows: ``n`` counts the distinct questions of the type there, so a
    question read at three budgets or by three seeds counts once per budget, never three times in one row."""
    metric = QASPER_F1 if QASPER_F1 in rows and rows[QASPER_F1].notna().any() else options.metric
    if "qtype" not in rows or rows["qtype"].nunique() < 2 or metric not in rows:
        return None
    type_column = "qasper_answer_type" if metric == QASPER_F1 and "qasper_answer_type" in rows else "qtype"
    settings = [c for c in (layout.settings if layout is not None else ()) if c in rows]
    question = "qkey" if "qkey" in rows else "question_id"
    records = []
    for values, group in rows.groupby([*settings, "policy", type_column], sort=True, dropna=False, observed=True):
        *at, policy, qtype = values
        mean, low, high = bootstrap_mean_ci(
            group[metric].to_numpy(float), n_resamples=min(options.n_resamples, 2000), seed=options.seed
        )
        records.append(
            {
                **dict(zip(settings, at, strict=True)),
                "policy": policy,
                "question_type": qtype,
                "n": int(group[question].nunique()),
                "n_rows": len(group),
                "mean": mean,
                "ci_low": low,
                "ci_high": high,
            }
        )
    data = pd.DataFrame(records)
    index = [*settings, "question_type"]
    display = data.pivot_table(index=index, columns="policy", values="mean", aggfunc="first", dropna=False)
    display = display.map(fmt).reset_index()
    counts = data.groupby(index, dropna=False)["n"].max().reset_index()
    display = display.merge(counts, on=index, how="left")
    display = display[[*index, "n", *(c for c in display.columns if c not in (*index, "n"))]]
    for column in settings:
        display[column] = display[column].map(format_value)
    display = display.rename(columns={c: short_name(c) for c in settings})
    where = f" at each {', '.join(short_name(c) for c in settings)}" if settings else ""
    return ReportTable(
        "score_by_question_type",
        f"{metric} by question type",
        data,
        display,
        note=f"Mean {metric} per question type (rows pooled over seeds); n = distinct questions of the type{where}; "
        "CIs in the CSV.",
    )


def relative_change(value: float, reference: float, quantity: str, smaller: str) -> str:
    """``value`` against ``reference`` in words: "80.0% fewer summary nodes", "13.0% more build time"."""
    change = value / reference - 1 if reference else math.nan
    if not math.isfinite(change):
        return f"{quantity} not comparable"
    return f"{abs(change):.1%} {'more' if change > 0 else smaller} {quantity}"


def tree_cost_table(rows: pd.DataFrame, layout: Layout, options: Options) -> ReportTable | None:
    """Summary nodes and construction time per question for each tree (building excludes preprocessing). Only
    ``tree.summary_nodes`` is required: a tree of your own need not report layers or build time."""
    if "tree.summary_nodes" not in rows or rows["tree.summary_nodes"].notna().sum() == 0:
        return None
    built = rows[rows["tree.summary_nodes"].notna()]
    records = []
    for tree, group in built.groupby("tree"):
        layers = [json.loads(v) for v in group.get("tree.nodes_per_layer", pd.Series(dtype=object)).dropna()]
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
                "build_s_mean_fresh": float(fresh.get("tree.build_seconds", pd.Series(dtype=float)).mean()),
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


# ----------------------------------------------------------------------------------------------------------
# whether the trees' summaries reached the reader

NO_TREE = "none"
SUMMARY_REACH_NOTE = (
    "Collapsed-tree retrieval ranks every chunk and summary by cosine to the question and packs them in rank order "
    "under the budget, so a summary ranked below the chunks that fill the budget is never read; then the tree's "
    "context, and its answer, are the no-tree context and answer. Per tree: questions whose pool holds a summary, "
    "the best summary's rank there (1 = first), how many contexts held a summary, and how many were the no-tree "
    "context word for word (where the rows hold a no-tree run of the same questions)."
)


REACH_HEADINGS = {
    "with_summaries_in_pool": "pool holds a summary",
    "best_summary_rank_median": "best summary's rank (median)",
    "pool_size_median": "pool size (median)",
    "contexts_with_summary": "a summary read",
    "summary_tokens_mean": "summary tokens read (mean)",
    "contexts_as_no_tree": "context as no tree",
}


def summary_reach(rows: pd.DataFrame, by: list[str]) -> pd.DataFrame:
    """Per group of ``by`` (rows with a tree): questions whose ranked pool holds a summary, the median rank of
    the best one, the median pool size, contexts that held a summary and their mean summary tokens, and contexts
    equal to the no-tree run's (``tree`` = none) of the same question and budget."""
    if not {"pool", "snippets", "tree"} <= set(rows.columns):
        return pd.DataFrame()
    keys = [c for c in ("qkey", "budget") if c in rows]
    baseline = rows[rows["tree"].astype(str) == NO_TREE]
    contexts = (
        baseline.drop_duplicates(keys).set_index(keys)["context"] if "context" in rows and len(baseline) else None
    )
    records = []
    for values, group in rows[rows["tree"].astype(str) != NO_TREE].groupby(by, sort=True, dropna=False):
        ranks = group["pool"].map(summary_ranks)
        with_summaries = ranks.map(bool)
        tokens = group["snippets"].map(summary_tokens)
        same = math.nan
        if contexts is not None:
            matched = pd.MultiIndex.from_frame(group[keys]) if len(keys) > 1 else pd.Index(group[keys[0]])
            same = int((group["context"].to_numpy() == contexts.reindex(matched).to_numpy()).sum())
        records.append(
            {
                **dict(zip(by, values if isinstance(values, tuple) else (values,), strict=True)),
                "questions": len(group),
                "with_summaries_in_pool": int(with_summaries.sum()),
                "best_summary_rank_median": float(ranks[with_summaries].map(min).median()),
                "pool_size_median": float(group["n_candidates"].median()) if "n_candidates" in group else math.nan,
                "contexts_with_summary": int((tokens > 0).sum()),
                "summary_tokens_mean": float(tokens.mean()),
                "contexts_as_no_tree": same,
            }
        )
    return pd.DataFrame(records)


def summary_ranks(pool_json: str | None) -> list[int]:
    """The 1-based ranks of the summary nodes in a question's ranked pool (``pool``: candidates with scores)."""
    pool = json.loads(pool_json) if isinstance(pool_json, str) and pool_json else []
    ranked = sorted(pool, key=lambda c: -float(c.get("score", 0.0)))
    return [i + 1 for i, c in enumerate(ranked) if c.get("kind") == "summary"]


def summary_tokens(snippets_json: str | None) -> int:
    """Tokens of summary text in the packed context (``snippets``: what was packed, with its kind)."""
    snippets = json.loads(snippets_json) if isinstance(snippets_json, str) and snippets_json else []
    return sum(int(s.get("tok", 0)) for s in snippets if s.get("kind") == "summary")


def summary_reach_display(data: pd.DataFrame) -> pd.DataFrame:
    """``summary_reach``'s frame with its figures formatted for markdown."""
    formats = {"best_summary_rank_median": 0, "pool_size_median": 0, "summary_tokens_mean": 1}
    display = data.copy()
    for column, digits in formats.items():
        display[column] = display[column].map(lambda v, d=digits: fmt(v, digits=d))
    display["contexts_as_no_tree"] = display["contexts_as_no_tree"].map(lambda v: "–" if v != v else str(int(v)))
    return display.rename(columns=REACH_HEADINGS)


def summary_reach_table(rows: pd.DataFrame, layout: Layout, options: Options) -> ReportTable | None:
    data = summary_reach(rows, [c for c in ("dataset", "policy") if c in rows])
    if data.empty:
        return None
    title = "Summary trees: did the summaries reach the reader?"
    return ReportTable("summary_reach", title, data, summary_reach_display(data), note=SUMMARY_REACH_NOTE)


# ----------------------------------------------------------------------------------------------------------
# the question classifier against the annotated type

CLASS_ORDER = ("extractive", "abstractive", "yes_no", "unanswerable", "unannotated")
UNANNOTATED = "unannotated"
# The LM behind a tree, from the rows' config columns (the first one a run has).
# The LM that classified: the tree's own unless the tree names a classifier LM (a GGUF tree LM cannot score a
# reply, so its likelihood classifier is another build of the same weights).
LM_COLUMNS = tuple(
    f"cfg.tree.{lm}.{key}"
    for lm in ("classifier_lm", "lm")
    for key in ("name", "pretrained", "offline_model", "_target_")
)
AGREEMENT_KEYS = ("dataset", "tree", "classifier", "lm")


def _first_present(frame: pd.DataFrame, columns: tuple[str, ...], default: str) -> pd.Series:
    out = pd.Series(default, index=frame.index, dtype=object)
    for column in reversed(columns):
        if column in frame:
            values = frame[column]
            out = values.where(values.notna() & (values.astype(str) != ""), out)
    return out.astype(str)


def classified_questions(rows: pd.DataFrame) -> pd.DataFrame | None:
    """One row per (dataset, tree, classifier, LM, question) that a classifier routed, with the columns
    ``predicted``, ``annotated``, ``source`` (lm / rules / annotation) and ``parsed`` (the LM's output named
    one class; NaN when no LM was asked); None when no row carries both a class and an annotated class.
    A question repeated over seeds, budgets or packers is counted once (its class does not depend on them)."""
    needed = {"tree.question_class", "tree.annotated_class"}
    if not needed <= set(rows.columns):
        return None
    rows = rows.loc[rows["tree.question_class"].notna() & rows["tree.annotated_class"].notna()]
    if rows.empty:
        return None
    question = rows["qkey"] if "qkey" in rows else rows["question_id"]
    classifier = _first_present(rows, ("tree.classifier", "cfg.tree.classifier"), "lm")
    frame = pd.DataFrame(
        {
            "dataset": rows["dataset"].astype(str) if "dataset" in rows else "–",
            "tree": rows["tree"].astype(str) if "tree" in rows else "dtcrs",
            "classifier": classifier.replace({"gold": "annotation"}),
            "lm": _first_present(rows, LM_COLUMNS, "–"),
            "question": question.astype(str),
            "predicted": rows["tree.question_class"].astype(str),
            "annotated": rows["tree.annotated_class"].astype(str),
            "source": rows["tree.class_source"].astype(str) if "tree.class_source" in rows else "–",
            "parsed": rows["tree.lm_parsed"] if "tree.lm_parsed" in rows else float("nan"),
            # likelihood | generation | rules | annotation; rows older than classification by likelihood: "–"
            "decided_by": rows["tree.class_decided_by"].astype(str) if "tree.class_decided_by" in rows else "–",
        }
    )
    return frame.drop_duplicates([*AGREEMENT_KEYS, "question"]).reset_index(drop=True)


def classifier_agreement(questions: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(summary, confusion) per (dataset, tree, classifier, LM) of :func:`classified_questions`.

    summary: ``questions``; ``annotated`` and ``unannotated`` (a question without an annotated type is
    counted there and left out of the accuracy, never scored against a guess); ``accuracy`` (predicted ==
    annotated over the annotated questions); ``lm_parsed_share`` (classes the LM's output named, over the
    questions the LM was asked; NaN for a classifier that asks none); ``lm_accuracy`` (accuracy of the
    classes the LM's output gave, fallbacks left out); ``rules_share`` (classes from the
    rules: the fallback under classifier=lm); ``likelihood_share`` (classes the LM decided by likelihood,
    ``tree.classify_by=likelihood``: every question it was asked); the predicted and annotated shares of
    abstractive (the class that gets a tree by default). confusion: annotated class (rows) by predicted class
    (columns), counts."""
    summaries, confusions = [], []
    for key, group in questions.groupby(list(AGREEMENT_KEYS), sort=True):
        annotated = group[group["annotated"] != UNANNOTATED]
        asked = group["parsed"].notna()
        by_lm = annotated[annotated["source"] == "lm"]  # the LM's own decisions, fallbacks left out
        parsed = group.loc[asked, "parsed"].astype(bool)
        summaries.append(
            {
                **dict(zip(AGREEMENT_KEYS, key, strict=True)),
                "questions": len(group),
                "annotated": len(annotated),
                "unannotated": len(group) - len(annotated),
                "correct": int((annotated["predicted"] == annotated["annotated"]).sum()),
                "accuracy": float((annotated["predicted"] == annotated["annotated"]).mean())
                if len(annotated)
                else math.nan,
                "lm_parsed_share": float(parsed.mean()) if len(parsed) else math.nan,
                "lm_accuracy": float((by_lm["predicted"] == by_lm["annotated"]).mean()) if len(by_lm) else math.nan,
                "rules_share": float((group["source"] == "rules").mean()),
                "likelihood_share": float((group["decided_by"] == "likelihood").mean()),
                "predicted_abstractive_share": float((group["predicted"] == "abstractive").mean()),
                "annotated_abstractive_share": float((annotated["annotated"] == "abstractive").mean())
                if len(annotated)
                else math.nan,
            }
        )
        counts = pd.crosstab(group["annotated"], group["predicted"])
        labels = [c for c in CLASS_ORDER if c in set(counts.index) | set(counts.columns)]
        labels += sorted((set(counts.index) | set(counts.columns)) - set(labels))
        counts = counts.reindex(index=labels, columns=labels, fill_value=0)
        for annotated_class, line in counts.iterrows():
            confusions.append(
                {
                    **dict(zip(AGREEMENT_KEYS, key, strict=True)),
                    "annotated": annotated_class,
                    **{f"predicted {c}": int(line[c]) for c in labels},
                }
            )
    confusion = pd.DataFrame(confusions)
    predicted = [c for c in confusion.columns if c.startswith("predicted ")]
    confusion[predicted] = confusion[predicted].fillna(0).astype(int)
    return pd.DataFrame(summaries), confusion


def classifier_agreement_tables(rows: pd.DataFrame, layout: Layout, options: Options) -> list[ReportTable]:
    """The question classifier against the annotated type: accuracy and shares, and the confusion matrix."""
    questions = classified_questions(rows)
    if questions is None:
        return []
    summary, confusion = classifier_agreement(questions)
    display = summary.drop(columns=["correct"]).copy()
    display["accuracy"] = [
        f"{fmt(a)} ({c}/{n})"
        for a, c, n in zip(summary["accuracy"], summary["correct"], summary["annotated"], strict=True)
    ]
    for column in (
        "lm_parsed_share",
        "lm_accuracy",
        "rules_share",
        "predicted_abstractive_share",
        "annotated_abstractive_share",
    ):
        display[column] = display[column].map(fmt)
    note = (
        "Each question counted once per dataset, tree, classifier and LM. Accuracy: the class that routed the "
        "question equals its annotated class, over the annotated questions (an unannotated one is counted "
        "apart, not scored). lm_parsed_share: the LM's output named exactly one class (an output naming "
        "several, such as an echo of the option list, is unparsed); rules_share: the class came from the "
        "rules (the fallback of classifier=lm). classifier=annotation routes by the annotated class (an "
        "oracle): its accuracy is 1 by construction."
    )
    return [
        ReportTable("classifier_agreement", "Question classifier vs annotated type", summary, display, note=note),
        ReportTable(
            "classifier_confusion",
            "Question classifier: confusion matrix (annotated class by predicted class)",
            confusion,
            confusion.astype(str),
            note="Counts of questions; rows: annotated class, columns: the class the classifier gave.",
        ),
    ]


def tree_tables(rows: pd.DataFrame, layout: Layout, options: Options) -> list[ReportTable]:
    return [
        t
        for t in (
            score_by_question_type_table(rows, layout, options),
            tree_cost_table(rows, layout, options),
            summary_reach_table(rows, layout, options),
            *classifier_agreement_tables(rows, layout, options),
        )
        if t
    ]
