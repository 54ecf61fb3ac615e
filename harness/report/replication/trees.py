"""Seed 002: RAPTOR against the query-driven tree (DTCRS), with the DTCRS question classifier scored against
the annotated answer type: every tree verdict names its classifier and that classifier's accuracy."""

from __future__ import annotations

import logging
import math
from pathlib import Path
from statistics import NormalDist

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from harness.report.formatting import fmt
from harness.report.replication.common import (
    SEED002_BUILD_TIME_CHANGE,
    TREES,
    Section,
    Settings,
    _save,
    verdict,
    viewer_links,
)
from harness.report.replication.provenance import study_commands
from harness.report.trees import classified_questions, classifier_agreement
from harness.stats.power import mde_from_standard_error

log = logging.getLogger("harness.report.replication")

# ----------------------------------------------------------------------------------------------------------
# seed 002: summary trees


CLASSIFY_TREE = "dtcrs_classify"  # the study's classification-only runs (no tree), on every question
CLASSIFIER_ORDER = ("lm", "annotation", "rules")
PAPER_ABSTRACTIVE_SHARE = 0.20  # seed 002: more than 20% of QASPER questions are abstractive
MIN_BUILDS = 2  # fresh builds of each tree below which a change gets no interval and no verdict


def tree_variants(rows: pd.DataFrame) -> pd.Series:
    """raptor, dtcrs (lm), dtcrs (annotation), ... per row; the classification-only runs are "classify".
    A DTCRS row without a classifier column (an older study) was routed by the LM."""
    classifier = rows["tree.classifier"] if "tree.classifier" in rows else pd.Series(None, index=rows.index)
    classifier = classifier.astype(object).where(classifier.notna(), "lm").astype(str).replace({"gold": "annotation"})
    tree = rows["tree"].astype(str)
    named = "dtcrs (" + classifier + ")"
    return tree.where(tree != "dtcrs", named).where(tree != CLASSIFY_TREE, "classify")


def _wilson(successes: int, n: int, confidence: float) -> tuple[float, float]:
    if n == 0:
        return math.nan, math.nan
    z = NormalDist().inv_cdf(0.5 + confidence / 2)
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return centre - half, centre + half


def _share(count: int, n: int) -> str:
    return f"{count / n:.0%} ({count}/{n})" if n else "–"


def _classifier_summary(rows: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame] | None:
    """The classifier's agreement with the annotated type per dataset, classifier, LM and scope: the
    trees' sample (the tree runs) and every question of the file (the classification-only runs)."""
    questions = classified_questions(rows)
    if questions is None:
        return None
    questions["tree"] = np.where(questions["tree"] == CLASSIFY_TREE, "all questions", "trees' sample")
    summary, confusion = classifier_agreement(questions)
    return summary.rename(columns={"tree": "scope"}), confusion.rename(columns={"tree": "scope"})


def _accuracy_text(summary: pd.DataFrame, dataset: str, classifier: str) -> str:
    """A classifier's accuracy (and, for the LM, how its classes came) on the trees' sample and on all
    questions: the figure every verdict of that classifier carries."""
    at = summary[(summary["dataset"] == dataset) & (summary["classifier"] == classifier)].set_index("scope")
    parts = []
    for scope in ("trees' sample", "all questions"):
        if scope not in at.index:
            continue
        r = at.loc[scope]
        text = f"accuracy {_share(int(r['correct']), int(r['annotated']))} on {scope}"
        likelihood = int(round(r.get("likelihood_share", 0.0) * r["questions"]))
        if classifier == "lm" and likelihood:
            text += f" (decided by the LM's likelihood {likelihood}/{int(r['questions'])})"
        elif classifier == "lm":
            parsed = int(round(r["lm_parsed_share"] * r["questions"])) if math.isfinite(r["lm_parsed_share"]) else 0
            rules = int(round(r["rules_share"] * r["questions"]))
            text += f" (LM output parsed {parsed}/{int(r['questions'])}, rules {rules}/{int(r['questions'])})"
        parts.append(text)
    if classifier == "annotation" and parts:
        parts.append("an oracle")
    return ", ".join(parts) if parts else "accuracy not measured (no annotated class in the rows)"


def trees_section(settings: Settings) -> Section:
    section = Section("Seed 002: RAPTOR vs the query-driven tree (DTCRS): nodes and build time")
    rows = settings.load(TREES)
    if rows is None:
        return section.missing(TREES)
    reducers = sorted({str(r) for r in rows.get("cfg.tree.reducer", []) if isinstance(r, str)})
    section.add(
        "Claim: the query-driven tree builds fewer nodes and cuts construction time by 81% against RAPTOR. "
        f"Both trees reduce the embeddings with {' and '.join(reducers).upper() or 'an unrecorded reducer'} "
        "before their Gaussian mixtures (`tree.reducer`; RAPTOR's is UMAP) and "
        "summarise with the same GGUF model through llama.cpp; LM calls and prompt tokens are those "
        "sent to the model (cold caches). RAPTOR builds one tree per document, shared by its questions; DTCRS "
        "builds one per question, for the questions its classifier calls abstractive. DTCRS runs with two "
        "classifiers: `lm` (the paper's: the LM names the question's type, the rules decide when its output "
        "names no type or several) and `annotation` (the annotated answer type, an oracle that separates "
        "tree construction from classification). Totals are per dataset.",
    )
    study_commands(section, settings, [TREES], "python -m harness.report replicate --sections trees")
    viewer_links(section, settings, TREES)
    rows = rows.assign(variant=tree_variants(rows))
    classified = _classifier_summary(rows)
    summary = classified[0] if classified is not None else pd.DataFrame()
    if classified is not None:
        _classifier_lines(section, rows, *classified, settings)

    records, verdicts = [], []
    variants = [v for v in ("raptor", *(f"dtcrs ({c})" for c in CLASSIFIER_ORDER)) if v in set(rows["variant"])]
    for dataset in sorted(rows["dataset"].astype(str).unique()):
        at = rows[rows["dataset"] == dataset]
        totals = {}
        for variant in variants:
            built = at[(at["variant"] == variant) & at["tree.summary_nodes"].notna()]
            fresh = built[~built["tree.cached"].astype(bool)] if "tree.cached" in built else built
            totals[variant] = fresh
            records.append(
                {
                    "dataset": dataset,
                    "tree": variant,
                    "questions": int(at.loc[at["variant"] == variant, "qkey"].nunique()),
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
        raptor = totals.get("raptor")
        for variant in variants[1:]:
            dtcrs = totals[variant]
            if raptor is None or not (len(raptor) and len(dtcrs)):
                continue
            classifier = variant.removeprefix("dtcrs (").removesuffix(")")
            accuracy = _accuracy_text(summary, dataset, classifier) if len(summary) else "accuracy not measured"
            verdicts.extend(_tree_verdicts(section, dataset, classifier, accuracy, raptor, dtcrs, settings))
    if not records:
        section.add("", "No tree runs yet (only classification runs): the tree verdicts need the study's tree jobs.")
        return section
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
        "DTCRS against RAPTOR, totals over the fresh builds (95% interval from resampling each tree's builds); "
        "each verdict names the classifier that routed DTCRS's questions and that classifier's accuracy against "
        "the annotated type:",
        "",
        *verdicts,
    )
    return section


def _classifier_lines(
    section: Section, rows: pd.DataFrame, summary: pd.DataFrame, confusion: pd.DataFrame, settings: Settings
) -> None:
    """The classifier subsection: how the annotated class is derived, agreement, confusion, abstractive share."""
    section.add(
        "",
        "**The question classifier against the annotated type.** DTCRS's tree verdicts rest on its "
        "classifier, so it is scored here against each question's annotated answer type (`tree.annotated_class` "
        "in every DTCRS row). QASPER annotates each answer as extractive, abstractive, yes/no or unanswerable "
        "(the four classes the paper routes by); a question's annotated class is its annotators' majority "
        "type, a tie going to the type named first (the first annotator's, which is also the loader's "
        "`qtype`). QuALITY and NarrativeQA annotate no answer type: their loaders map every question to "
        "abstractive (a QuALITY option and a NarrativeQA answer are written by annotators, not copied spans), "
        "a choice of this harness, not the paper's. A question with no annotated type is counted as "
        "unannotated, never guessed. 'all questions' is the classification-only run over every question of "
        'the dataset file (no tree); "trees\' sample" the questions the trees were built for.',
    )
    if "tree.annotators" in rows:
        qasper = rows[(rows["dataset"] == "qasper") & rows["tree.annotators"].notna()].drop_duplicates("qkey")
        several = qasper[qasper["tree.annotators"] > 1]
        if len(several):
            split = int((several["tree.annotator_agreement"] < 1).sum())
            pairs = bool((several["tree.annotators"] == 2).all())
            section.add(
                "",
                f"On QASPER {len(several)} of {len(qasper)} questions have more than one annotator and their "
                f"types differ on {split} of them"
                + (
                    " (two annotators each: a split is a tie, so the class is the first annotator's)." if pairs else "."
                ),
            )
    display = pd.DataFrame(
        {
            "dataset": summary["dataset"],
            "scope": summary["scope"],
            "classifier": summary["classifier"],
            "LM": summary["lm"],
            "questions": summary["questions"],
            "unannotated": summary["unannotated"],
            "accuracy": [_share(int(c), int(n)) for c, n in zip(summary["correct"], summary["annotated"], strict=True)],
            "LM output parsed": summary["lm_parsed_share"].map(lambda v: fmt(v, digits=2)),
            "accuracy when parsed": summary["lm_accuracy"].map(lambda v: fmt(v, digits=2)),
            "from rules": summary["rules_share"].map(lambda v: fmt(v, digits=2)),
            "called abstractive": summary["predicted_abstractive_share"].map(lambda v: fmt(v, digits=2)),
            "annotated abstractive": summary["annotated_abstractive_share"].map(lambda v: fmt(v, digits=2)),
        }
    )
    section.table(display)
    lm_confusion = confusion[(confusion["classifier"] == "lm")]
    if len(lm_confusion):
        scope = "all questions" if (lm_confusion["scope"] == "all questions").any() else "trees' sample"
        lm_confusion = lm_confusion[lm_confusion["scope"] == scope]
        predicted = [c for c in lm_confusion.columns if c.startswith("predicted ")]
        lm_confusion = lm_confusion[lm_confusion[predicted].sum(axis=1) > 0]  # annotated classes with questions
        section.add(
            f"Confusion matrix of the LM classifier ({scope}; rows: annotated class, columns: the class that "
            "routed the question, LM or rules):"
        )
        section.table(
            lm_confusion.drop(columns=["scope", "classifier", "tree"], errors="ignore").rename(columns={"lm": "LM"})
        )
    shares = []
    for dataset in sorted(summary["dataset"].unique()):
        at = summary[(summary["dataset"] == dataset) & (summary["classifier"] == "lm")]
        at = at[at["scope"] == "all questions"] if (at["scope"] == "all questions").any() else at
        if at.empty:
            continue
        r = at.iloc[0]
        n = int(r["annotated"])
        abstractive = int(round(r["annotated_abstractive_share"] * n)) if n else 0
        low, high = _wilson(abstractive, n, settings.confidence)
        called = int(round(r["predicted_abstractive_share"] * r["questions"]))
        line = (
            f"- {dataset}: {_share(abstractive, n)} of the annotated questions are abstractive "
            f"(95% Wilson [{low:.0%}, {high:.0%}]); the LM classifier called {_share(called, int(r['questions']))} "
            "abstractive"
        )
        if dataset == "qasper":
            outcome = verdict(low - PAPER_ABSTRACTIVE_SHARE, high - PAPER_ABSTRACTIVE_SHARE)
            outcome = outcome.replace("includes zero", "includes 20%")
            line += f"; paper: more than 20% → {outcome}"
            section.claim(
                "seed 002: more than 20% of QASPER questions are abstractive (annotated type)",
                outcome,
                f"{_share(abstractive, n)} [{low:.0%}, {high:.0%}]; the LM classifier called "
                f"{_share(called, int(r['questions']))}",
            )
        shares.append(line)
    if shares:
        section.add("Abstractive questions, the class that gets a tree:", "", *shares)
    section.add("")


def _tree_verdicts(
    section: Section,
    dataset: str,
    classifier: str,
    accuracy: str,
    raptor: pd.DataFrame,
    dtcrs: pd.DataFrame,
    settings: Settings,
) -> list[str]:
    """The verdict lines (and verdict-table claims) of one DTCRS classifier against RAPTOR on one dataset."""
    name = f"DTCRS ({classifier} classifier)"
    per_tree = {
        tree: frame.loc[frame["tree.summary_nodes"] > 0, "tree.build_seconds"].mean()
        for tree, frame in (("raptor", raptor), ("dtcrs", dtcrs))
    }
    with_trees = int((dtcrs["tree.summary_nodes"] > 0).sum())
    routed = ""
    if "tree.annotated_class" in dtcrs:
        annotated = dtcrs["tree.annotated_class"].astype(str)
        hits = int(((dtcrs["tree.summary_nodes"] > 0) & (annotated == "abstractive")).sum())
        routed = f" ({hits} of them annotated abstractive, of {int((annotated == 'abstractive').sum())} such questions)"
    lines = [
        f"- {dataset}, {name}; {accuracy}: each RAPTOR tree serves {len(dtcrs) / len(raptor):.1f} of the sampled "
        f"questions; DTCRS built a tree for {with_trees} of {len(dtcrs)} questions{routed}; per tree with summaries "
        f"{fmt(per_tree['dtcrs'], digits=1)} s against RAPTOR's {fmt(per_tree['raptor'], digits=1)} s, so "
        + (
            "the saving comes from building fewer trees, not cheaper ones"
            if not per_tree["dtcrs"] < per_tree["raptor"]
            else "its trees are also cheaper one for one"
        )
    ]
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
        builds = f"{len(a)} DTCRS and {len(b)} RAPTOR build{'' if len(b) == 1 else 's'}"
        if not with_trees:
            # A DTCRS that built no tree "saves" everything: a comparison of tree construction needs a tree.
            outcome = "no DTCRS tree to compare (its classifier sent every question to the dense pool)"
            figure, power = f"{change:+.0%} (no tree built)", builds
        elif min(len(a), len(b)) < MIN_BUILDS:
            # Resampling one build gives it back every time: a zero-width interval and an MDE of 0%, which
            # would read as certainty. Below two builds a side there is no spread to measure.
            outcome = f"too few runs ({builds}; {MIN_BUILDS} per tree at least)"
            figure, power = f"{change:+.0%} (no interval)", builds
        else:
            # sum(DTCRS)/sum(RAPTOR) - 1 over independent resamples of each tree's builds
            low, high, se = two_sample_ci(a, b, lambda ra, rb: ra.sum(1) / rb.sum(1) - 1, settings, 5000)
            mde = mde_from_standard_error(se)
            # Only the build time has a figure in the paper; "fewer nodes" is a direction without a size.
            outcome = verdict(low, high, direction=-1, mde=mde, paper=effect, percent=True)
            figure = f"{change:+.0%} [{low:+.0%}, {high:+.0%}]"
            power = f"{builds}, MDE {mde:.0%}"
        lines.append(
            f"- {dataset}, {name}: {quantity} {figure} ({power})" + (f"; paper {paper} → {outcome}" if paper else "")
        )
        if paper:
            section.claim(
                f"seed 002: {name} below RAPTOR on {quantity} ({dataset})",
                outcome,
                f"{figure} vs paper {paper}; {power}; classifier {accuracy}",
            )
    return lines


def _trees_figure(records: pd.DataFrame, settings: Settings) -> Path:
    """Total build seconds and summary nodes per dataset, RAPTOR beside DTCRS under each classifier."""
    fig = Figure(figsize=(9.0, 3.8))
    datasets = list(dict.fromkeys(records["dataset"]))
    trees = list(dict.fromkeys(records["tree"]))
    width = 0.8 / max(len(trees), 1)
    for i, (column, label) in enumerate((("build s", "build seconds (total)"), ("summary nodes", "summary nodes"))):
        axis = fig.add_subplot(1, 2, i + 1)
        for j, tree in enumerate(trees):
            values = [
                float(records.loc[(records["dataset"] == d) & (records["tree"] == tree), column].iloc[0])
                if ((records["dataset"] == d) & (records["tree"] == tree)).any()
                else 0.0
                for d in datasets
            ]
            offset = (j - (len(trees) - 1) / 2) * width
            axis.bar(
                np.arange(len(datasets)) + offset,
                values,
                width=width,
                label=tree.replace("dtcrs", "DTCRS").replace("raptor", "RAPTOR"),
            )
        axis.set_xticks(range(len(datasets)), datasets)
        axis.set_ylabel(label)
        axis.grid(alpha=0.3, axis="y")
    fig.axes[0].legend(fontsize="small")
    return _save(fig, settings.figures / "trees.png")


def two_sample_ci(a: np.ndarray, b: np.ndarray, statistic, settings: Settings, most: int) -> tuple[float, float, float]:
    """Percentile interval of ``statistic(resamples of a, resamples of b)`` (one resample a row, a's and b's drawn
    independently with the settings' seed, at most ``most`` of them), and the draws' standard deviation (the
    standard error behind the minimum detectable effect)."""
    rng = np.random.default_rng(settings.seed)
    n = min(settings.n_resamples, most)
    draws = statistic(a[rng.integers(0, a.size, size=(n, a.size))], b[rng.integers(0, b.size, size=(n, b.size))])
    tail = (1 - settings.confidence) / 2
    return float(np.quantile(draws, tail)), float(np.quantile(draws, 1 - tail)), float(np.std(draws, ddof=1))
