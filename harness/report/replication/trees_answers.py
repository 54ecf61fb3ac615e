"""Seed 002's answer-quality claims as verdicts: QASPER answer F1 (its Table 3) and QuALITY accuracy (Table 4) of
DTCRS against RAPTOR's collapsed tree and the dense baseline, and the gain by annotated question type (Table 6),
each read by the offline reader of the trees study's runs, never the paper's GPT-4."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from harness.metrics.registry import QASPER_F1, QUALITY_CORRECT
from harness.report.formatting import fmt_ci
from harness.report.replication.common import (
    TREES,
    Section,
    Settings,
    _diff,
    _evidence,
    _save,
    _verdict,
    read_with,
    verdict,
)
from harness.report.replication.provenance import study_commands
from harness.report.replication.trees import tree_variants, two_sample_ci
from harness.report.run_sources import data_files, recorded_digests
from harness.report.trees import SUMMARY_REACH_NOTE, summary_reach, summary_reach_display
from harness.stats.power import mde_from_standard_error

# The answer metric of each dataset, as its official evaluator scores an answer (harness.metrics.longform).
ANSWER_METRICS = {"qasper": (QASPER_F1, "answer F1"), "quality": (QUALITY_CORRECT, "accuracy")}
VARIANT_ORDER = ("dense", "raptor", "dtcrs (lm)", "dtcrs (annotation)")
# The paper's comparisons: DTCRS against each baseline, under each classifier the study routes it by.
CONTRASTS = tuple((d, b) for d in ("dtcrs (lm)", "dtcrs (annotation)") for b in ("raptor", "dense"))
ABSTRACTIVE = "abstractive"
# The first 10 train papers as exported from the Hugging Face conversion of allenai/qasper (rajsr-p/qasper-personal
# at d40559b, 451,659 bytes): a stand-in read at the official train file's path, not that file.
QASPER_HF_EXPORT_SHA256 = "8c2e21e84c457cd36ec6749e24b8051fa7fa2dd42fb5455263af4621e9543071"
NO_DIFFERENCE = "the same answers, or answers scored alike"


def answer_variants(rows: pd.DataFrame) -> pd.Series:
    """dense, raptor, dtcrs (lm), dtcrs (annotation) per row (None for the classification-only runs)."""
    variant = tree_variants(rows).replace({"none": "dense"})
    return variant.where(variant.isin(VARIANT_ORDER), None)


def _answered(rows: pd.DataFrame) -> pd.DataFrame:
    """The rows with an answer score of their dataset's metric (selection-only rows have none)."""
    answered = pd.Series(False, index=rows.index)
    for dataset, (metric, _) in ANSWER_METRICS.items():
        if metric in rows:
            answered |= (rows["dataset"].astype(str) == dataset) & rows[metric].notna()
    return rows[answered]


def annotated_classes(rows: pd.DataFrame) -> pd.Series:
    """Each question's annotated class (``tree.annotated_class`` of its DTCRS rows: the annotators' majority
    answer type), by ``qkey``; a question no DTCRS row names keeps its loader's type (``qtype``)."""
    classes = pd.Series(dtype=object)
    if "tree.annotated_class" in rows:
        named = rows.dropna(subset=["tree.annotated_class"])
        classes = named.drop_duplicates("qkey").set_index("qkey")["tree.annotated_class"].astype(str)
    fallback = rows.drop_duplicates("qkey").set_index("qkey")["qtype"].astype(str) if "qtype" in rows else classes
    return classes.combine_first(fallback)


def trees_answers_section(settings: Settings) -> Section:
    section = Section("Seed 002: answers from DTCRS, RAPTOR and dense retrieval (QASPER F1, QuALITY accuracy)")
    rows = settings.load(TREES)
    if rows is None:
        return section.missing(TREES)
    rows = _answered(rows.assign(variant=answer_variants(rows)).dropna(subset=["variant"]))
    rows = rows.assign(annotated=rows["qkey"].map(annotated_classes(rows)))
    if rows.empty:
        section.add("**No answers yet.** The trees study's runs read no answer (they predate `read: true`):")
        section.command(TREES.command)
        return section
    budget = int(rows["budget"].iloc[0])
    section.add(
        "Claims: DTCRS answers QASPER better than RAPTOR and than dense retrieval (Table 3, answer F1; 58.5 with "
        "GPT-4) and QuALITY too (Table 4, accuracy), and it helps abstractive questions most (Table 6).",
        "",
        f"Setting: {read_with(rows)} reads each variant's context at B = {budget} (seed "
        f"{int(rows['seed'].iloc[0])}): an offline reader, **not the paper's GPT-4**, so the figures compare the "
        "trees' contexts through this reader and say nothing of GPT-4's scores. QASPER F1 is the official "
        "evaluator's (max over the annotators' answers); QuALITY accuracy maps the answer to an option. Data: "
        f"{data_files(rows)}.{_data_note(rows)}",
    )
    study_commands(section, settings, [TREES], "python -m harness.report replicate --sections trees trees_answers")
    section.table(_means_table(rows, settings))
    figure = _by_type_figure(rows, settings)
    if figure is not None:
        section.add("", f"![seed 002: QASPER F1 by annotated type]({settings.relative(figure)})", "")
    _summary_reach(section, rows)
    records = []
    for dataset in sorted(rows["dataset"].astype(str).unique()):
        metric, label = ANSWER_METRICS[dataset]
        at = rows[rows["dataset"] == dataset]
        for a, b in CONTRASTS:
            if not {a, b} <= set(at["variant"]):
                continue
            result = settings.contrast(at, "variant", a, b, metric)
            outcome = _answer_verdict(result)
            records.append(_contrast_record(dataset, "all", a, b, label, result, outcome))
            section.claim(f"seed 002 answers: {a} > {b} on {label} ({dataset})", outcome, _evidence(result))
            if dataset == "qasper":
                for kind in sorted(at["annotated"].dropna().unique()):
                    typed = at[at["annotated"] == kind]
                    if {a, b} <= set(typed["variant"]):
                        result = settings.contrast(typed, "variant", a, b, metric)
                        records.append(_contrast_record(dataset, kind, a, b, label, result, _answer_verdict(result)))
    section.add(
        "Paired contrasts, DTCRS minus each baseline, over the questions both read (95% interval from a bootstrap "
        "over questions; n questions, SD of the per-question differences, MDE at α = 0.05 and 80% power). By type: "
        "the question's annotated class, the one the classifier tables score against:"
    )
    section.table(pd.DataFrame(records))
    _abstractive_gain(section, rows, settings)
    _what_n_shows(section, records)
    return section


def _data_note(rows: pd.DataFrame) -> str:
    """What the questions are, against the paper's evaluation sets: QASPER's train papers, QuALITY's example file."""
    notes = []
    qasper = rows[rows["dataset"] == "qasper"]
    if "cfg.dataset.split" in qasper and (qasper["cfg.dataset.split"].astype(str) == "train").any():
        notes.append(
            f"The {qasper['qkey'].nunique()} QASPER questions come from papers of QASPER's **train** split, not the "
            "split the paper evaluates on; a user with the official train file reproduces them from the shipped "
            "paper ids (`dataset=qasper_train_first10`)."
        )
    if QASPER_HF_EXPORT_SHA256 in recorded_digests(qasper):
        notes.append(
            f"The file these runs read (sha256 `{QASPER_HF_EXPORT_SHA256[:12]}`) is not the official "
            "`qasper-train-v0.3.json` but the same 10 train papers exported from the Hugging Face conversion of "
            "allenai/qasper (rajsr-p/qasper-personal at d40559b), read at the official file's path; the shipped "
            "id list selects the same 51 questions by id from the official file, whose bytes differ."
        )
    quality = rows[rows["dataset"] == "quality"]
    if (
        "cfg.dataset.path" in quality
        and quality["cfg.dataset.path"].astype(str).str.endswith("quality_example.jsonl").any()
    ):
        notes.append(
            f"The {quality['qkey'].nunique()} QuALITY questions are those of the repository's example file, not a "
            "split of the release."
        )
    return "".join(f" {note}" for note in notes)


def _answer_verdict(result: dict) -> str:
    """The verdict of a contrast; one where every question scored the same under both variants says so, instead
    of an interval and an MDE of zero width that would read as certainty."""
    if result["n_questions"] >= 2 and result["won"] == result["lost"] == 0:
        return f"not reproduced (no question's score differed: {NO_DIFFERENCE})"
    return _verdict(result)


def _contrast_record(dataset: str, kind: str, a: str, b: str, label: str, result: dict, outcome: str) -> dict:
    return {
        "dataset": dataset,
        "questions": kind,
        "contrast": f"{a} − {b}",
        "metric": label,
        "Δ [CI]": _diff(result),
        "won/lost": f"{result['won']}/{result['lost']}",
        "n": result["n_questions"],
        "SD": f"{result['sd']:.3f}",
        "MDE": f"{result['mde']:.3f}" if result["won"] or result["lost"] else "–",
        "verdict": outcome,
    }


def _means_table(rows: pd.DataFrame, settings: Settings) -> pd.DataFrame:
    """Each variant's mean answer score per dataset (and per annotated QASPER type) with its interval."""
    records = []
    for dataset in sorted(rows["dataset"].astype(str).unique()):
        metric, label = ANSWER_METRICS[dataset]
        at = rows[rows["dataset"] == dataset]
        groups = [("all", at)]
        if dataset == "qasper":
            groups += [(kind, at[at["annotated"] == kind]) for kind in sorted(at["annotated"].dropna().unique())]
        for kind, group in groups:
            record = {"dataset": dataset, "metric": label, "questions": kind, "n": group["qkey"].nunique()}
            for variant in VARIANT_ORDER:
                cell = group[group["variant"] == variant]
                record[variant] = fmt_ci(*settings.means(cell, [metric])[metric]) if len(cell) else "–"
            records.append(record)
    return pd.DataFrame(records)


def _summary_reach(section: Section, rows: pd.DataFrame) -> None:
    """Whether the trees' summaries reached the reader (``harness.report.trees.summary_reach``), per dataset and
    variant, against the dense runs."""
    data = summary_reach(rows, ["dataset", "variant"])
    if data.empty:
        return
    section.add(f"Did the trees reach the reader? {SUMMARY_REACH_NOTE.replace('no-tree', 'dense')}")
    section.table(summary_reach_display(data).rename(columns=lambda c: c.replace("no tree", "dense")))


def _abstractive_gain(section: Section, rows: pd.DataFrame, settings: Settings) -> None:
    """Table 6's claim as a difference in differences: DTCRS's mean gain over RAPTOR on the annotated-abstractive
    QASPER questions minus its gain on the others, with an interval from resampling each group's questions."""
    at = rows[rows["dataset"] == "qasper"]
    metric = ANSWER_METRICS["qasper"][0]
    classes = at.drop_duplicates("qkey").set_index("qkey")["annotated"]
    lines = []
    for a, b in CONTRASTS:
        if not {a, b} <= set(at["variant"]):
            continue
        wide = at[at["variant"].isin([a, b])].pivot_table(index="qkey", columns="variant", values=metric)
        gain = (wide[a] - wide[b]).dropna()
        abstractive = gain.index.map(classes) == ABSTRACTIVE
        x, y = gain[abstractive].to_numpy(float), gain[~abstractive].to_numpy(float)
        if min(x.size, y.size) < 2:
            continue
        low, high, se = two_sample_ci(x, y, lambda rx, ry: rx.mean(1) - ry.mean(1), settings, 10000)
        mde = mde_from_standard_error(se)
        outcome = (
            verdict(low, high, mde=mde) if se > 0 else f"not reproduced (no question's score differed: {NO_DIFFERENCE})"
        )
        figure = f"{x.mean() - y.mean():+.3f} [{low:+.3f}, {high:+.3f}]"
        power = f"{x.size} abstractive and {y.size} other questions, MDE {mde:.3f}"
        lines.append(f"- {a} − {b}: gain on abstractive minus gain on the others {figure} ({power}) → {outcome}")
        section.claim(
            f"seed 002 answers: {a} gains most over {b} on abstractive questions (qasper)",
            outcome,
            f"{figure}; {power}",
        )
    if lines:
        section.add(
            "Does DTCRS help abstractive questions most? Its gain on the annotated-abstractive questions minus its "
            "gain on the others (95% interval resampling the questions of each group):",
            "",
            *lines,
            "",
        )


def _what_n_shows(section: Section, records: list[dict]) -> None:
    """The plain statement of what these n can and cannot show, from the contrasts' own n and MDEs."""
    overall = [r for r in records if r["questions"] == "all"]
    if not overall:
        return
    measured = [f"{r['dataset']} {r['contrast']}: n = {r['n']}, MDE {r['MDE']}" for r in overall if r["MDE"] != "–"]
    alike = [f"{r['dataset']} {r['contrast']}" for r in overall if r["MDE"] == "–"]
    lines = ["What these n can and cannot show:"]
    if measured:
        lines.append(
            f"- {'; '.join(measured)}. A difference smaller than its MDE would be missed four times in five, so an "
            "interval that includes zero rules out only effects larger than the MDE."
        )
    if alike:
        lines.append(
            f"- {'; '.join(alike)}: every question scored the same under both variants, so there is no spread to "
            "measure; the contexts above say why."
        )
    smallest = min(overall, key=lambda r: r["n"])
    if smallest["n"] < 10:
        lines.append(
            f"- {smallest['dataset']}: {smallest['n']} questions, so its mean moves in steps of "
            f"{1 / smallest['n']:.2f}; only a change on most of them could show, and none of its verdicts generalises."
        )
    lines.append("- The by-type rows rest on fewer questions still. None of these figures bears on GPT-4's answers.")
    section.add(*lines, "")


def _by_type_figure(rows: pd.DataFrame, settings: Settings) -> Path | None:
    """QASPER answer F1 per annotated type, one bar per variant with its 95% interval."""
    at = rows[rows["dataset"] == "qasper"]
    if at.empty:
        return None
    metric = ANSWER_METRICS["qasper"][0]
    classes = at["annotated"]
    kinds = ["all", *sorted(classes.dropna().unique())]
    variants = [v for v in VARIANT_ORDER if v in set(at["variant"])]
    fig = Figure(figsize=(8.0, 3.6))
    axis = fig.add_subplot(1, 1, 1)
    width = 0.8 / max(len(variants), 1)
    for j, variant in enumerate(variants):
        means, errors = [], [[], []]
        for kind in kinds:
            of_kind = classes == kind if kind != "all" else pd.Series(True, index=at.index)
            cell = at[(at["variant"] == variant) & of_kind]
            mean, low, high = settings.means(cell, [metric])[metric] if len(cell) else (math.nan,) * 3
            means.append(mean)
            errors[0].append(mean - low)
            errors[1].append(high - mean)
        offset = (j - (len(variants) - 1) / 2) * width
        axis.bar(np.arange(len(kinds)) + offset, means, width=width, yerr=errors, capsize=2, label=variant)
    counts = [at["qkey"].nunique() if k == "all" else int(at.loc[classes == k, "qkey"].nunique()) for k in kinds]
    axis.set_xticks(range(len(kinds)), [f"{k}\n(n = {n})" for k, n in zip(kinds, counts, strict=True)])
    axis.set_ylabel("QASPER answer F1")
    axis.grid(alpha=0.3, axis="y")
    axis.legend(fontsize="small")
    return _save(fig, settings.figures / "trees_answers.png")
