"""Seed 000's reader ladder and the validity of answer-in-context."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from omegaconf import OmegaConf
from scipy import stats

from harness.metrics.registry import (
    ANSWER_IN_CONTEXT,
    ANSWER_IN_CONTEXT_GRADED,
    F1,
    RECALL_AT_K,
)
from harness.report.config_reference import CONF, defaults_list
from harness.report.formatting import fmt, fmt_ci
from harness.report.plots import reader_scale
from harness.report.replication.common import (
    LADDER,
    PACKER_LABELS,
    READER_IRCOT,
    Section,
    Settings,
    _diff,
    _evidence,
    _ordered_packers,
    _power,
    _save,
    _verdict,
    read_with,
    verdict,
)
from harness.report.replication.provenance import study_commands
from harness.report.run_sources import data_files
from harness.report.validity import aic_over_recall
from harness.stats.analyses import correlations
from harness.stats.power import mde_from_standard_error

log = logging.getLogger("harness.report.replication")

# ----------------------------------------------------------------------------------------------------------
# seed 000: reader ladder and validity


def _reader_order(rows: pd.DataFrame) -> list[str]:
    return sorted(rows["reader"].astype(str).unique(), key=lambda r: (reader_scale(r), r))


def ladder_section(settings: Settings) -> Section:
    section = Section("Seed 000: the reader ladder and the validity of answer-in-context")
    rows = settings.load(LADDER)
    if rows is None:
        return section.missing(LADDER)
    readers = _reader_order(rows)
    section.add(
        "Claims: the submodular packer's advantage reaches the reader's answers (F1), and answer-in-context "
        "explains reader accuracy beyond recall@k (incremental R², question-clustered interval).",
        "",
        f"Setting: {rows['qkey'].nunique()} {', '.join(sorted(rows['dataset'].astype(str).unique()))} questions "
        f"(seed {int(rows['seed'].iloc[0])}; data: {data_files(rows)}), B = {int(rows['budget'].iloc[0])}, "
        f"{rows['packer'].nunique()} "
        f"packers, readers {read_with(rows)}, greedy. The papers' readers (Qwen2.5 3B-32B) are configs "
        "(`reader=qwen2.5_7b` ...) for machines that have their weights; this ladder is what loads offline.",
    )
    study_commands(section, settings, [LADDER], "python -m harness.report replicate")
    means, contrasts, validity = [], [], []
    for reader in readers:
        at_reader = rows[rows["reader"] == reader]
        record = {"reader": reader}
        for packer in _ordered_packers(at_reader):
            record[PACKER_LABELS.get(packer, packer)] = fmt(at_reader.loc[at_reader["packer"] == packer, F1].mean())
        means.append(record)
        for other in ("packed", "focused"):
            if {"submod", other} <= set(at_reader["packer"]):
                result = settings.contrast(at_reader, "packer", "submod", other, F1)
                contrasts.append({"reader": reader, "contrast": f"submod − {other}", **result})
        complete = at_reader.dropna(subset=[F1, RECALL_AT_K, ANSWER_IN_CONTEXT])
        try:
            iv = aic_over_recall(complete, F1, settings)
        except ValueError as error:
            log.warning("%s: %s", reader, error)
            continue
        validity.append(
            {
                "reader": reader,
                "r(AiC, F1)": fmt(correlations(complete[ANSWER_IN_CONTEXT], complete[F1])["pearson"]),
                "r(graded AiC, F1)": fmt(correlations(complete[ANSWER_IN_CONTEXT_GRADED], complete[F1])["pearson"]),
                "r(recall@5, F1)": fmt(correlations(complete[RECALL_AT_K], complete[F1])["pearson"]),
                "R² recall@5": fmt(iv["r2_base"]),
                "R² + AiC": fmt(iv["r2_full"]),
                "ΔR² [clustered CI]": fmt_ci(iv["delta_r2"], iv["delta_r2_ci_low"], iv["delta_r2_ci_high"]),
                "rows / questions": f"{iv['n_rows']} / {iv['n_clusters']}",
                "_iv": iv,
            }
        )
    section.add("Mean F1 per packer (rows: readers by size):")
    section.table(pd.DataFrame(means))
    contrast_frame = pd.DataFrame(contrasts)
    shown = contrast_frame.assign(
        **{
            "Δ F1 [CI]": [_diff(r) for r in contrasts],
            "won / lost": [f"{r['won']} / {r['lost']}" for r in contrasts],
            "n": [r["n_questions"] for r in contrasts],
            "SD": [f"{r['sd']:.3f}" for r in contrasts],
            "MDE": [f"{r['mde']:.3f}" for r in contrasts],
            "verdict": [_verdict(r) for r in contrasts],
        }
    )[["reader", "contrast", "Δ F1 [CI]", "won / lost", "n", "SD", "MDE", "verdict"]]
    section.add(
        "Paired contrasts on F1 (95% paired bootstrap over questions; MDE: the smallest true difference detected "
        "at α = 0.05 with 80% power over these n questions):"
    )
    section.table(shown)
    if validity:
        section.add("Validity of answer-in-context (rows: every packer x question of one reader):")
        section.table(pd.DataFrame([{k: v for k, v in r.items() if k != "_iv"} for r in validity]))
        default = default_reader()
        judged = [("strongest rung", validity[-1])] + [
            ("the default reader", v) for v in validity[:-1] if v["reader"] == default
        ]
        for role, record in judged:
            outcome, power = _validity_verdict(record["_iv"], settings)
            section.add(
                f"**Verdict, validity ({role}, {record['reader']}): {outcome}** — ΔR² {record['ΔR² [clustered CI]']}; "
                f"{power}.",
                "",
            )
            section.claim(
                f"seed 000: answer-in-context explains F1 beyond recall@5 ({record['reader']})",
                outcome,
                f"ΔR² {record['ΔR² [clustered CI]']}; {power}",
            )
        section.add(
            "Up the ladder r(AiC, F1) goes "
            + " → ".join(v["r(AiC, F1)"] for v in validity)
            + ": the diagnostic is only as valid as the reader is able to use the context.",
            "",
        )
    top = [r for r in contrasts if r["reader"] == readers[-1]]
    if top:
        section.add(
            "**Verdict, reader-side gain (strongest rung): "
            + "; ".join(f"{r['contrast']} {_verdict(r)} ({_diff(r)}; {_power(r)})" for r in top)
            + ".**"
        )
        strongest_rows = rows[rows["reader"] == readers[-1]]
        aic = settings.contrast(strongest_rows, "packer", "submod", "packed", ANSWER_IN_CONTEXT)
        section.add(
            "",
            f"On these {strongest_rows['qkey'].nunique()} questions submod − naive on answer-in-context is "
            f"{_diff(aic)}"
            + (
                ": with no detectably more answers in its contexts, a reader-side gain could only come from how "
                "the answers are presented."
                if aic["ci_low"] <= 0
                else "."
            ),
        )
        # The reader-columns study claims submod − naive for its rung from the same cached answers: once is enough.
        ircot = settings.load(READER_IRCOT)
        claimed = (
            set(ircot.loc[ircot["budget"].isin(rows["budget"]), "reader"].astype(str)) if ircot is not None else set()
        )
        for r in top:
            if not (r["contrast"] == "submod − packed" and r["reader"] in claimed):
                section.claim(f"seed 000: {r['contrast']} > 0 on F1 ({r['reader']})", _verdict(r), _evidence(r))
    figure = _ladder_figure(contrasts, readers, settings)
    section.add("", f"![submod contrasts by reader]({settings.relative(figure)})")
    return section


def default_reader() -> str:
    """The ``name`` of the reader the primary config defaults to (conf/config.yaml)."""
    option, _ = defaults_list((CONF / "config.yaml").read_text(encoding="utf-8"))["reader"]
    return str(OmegaConf.load(CONF / "reader" / f"{option}.yaml")["name"])


def _validity_verdict(iv: dict, settings: Settings) -> tuple[str, str]:
    """The verdict on ΔR² and its power. ΔR² has no t-test behind it: its standard error is read off the
    clustered interval's width."""
    z = stats.norm.ppf(0.5 + settings.confidence / 2)
    mde = mde_from_standard_error((iv["delta_r2_ci_high"] - iv["delta_r2_ci_low"]) / (2 * z))
    outcome = verdict(iv["delta_r2_ci_low"], iv["delta_r2_ci_high"], mde=mde)
    return outcome, f"n = {iv['n_clusters']} questions, MDE {mde:.3f} (standard error from the interval's width)"


def _ladder_figure(contrasts: list[dict], readers: list[str], settings: Settings) -> Path:
    fig = Figure(figsize=(6.5, 4.2))
    axis = fig.add_subplot(1, 1, 1)
    names = list(dict.fromkeys(r["contrast"] for r in contrasts))
    for i, name in enumerate(names):
        points = [r for r in contrasts if r["contrast"] == name]
        x = np.array([readers.index(r["reader"]) + (i - (len(names) - 1) / 2) * 0.12 for r in points])
        mean = np.array([r["mean_diff"] for r in points])
        low = np.array([r["ci_low"] for r in points])
        high = np.array([r["ci_high"] for r in points])
        axis.errorbar(x, mean, yerr=[mean - low, high - mean], marker="o", capsize=3, linestyle="none", label=name)
    axis.axhline(0.0, color="grey", linestyle="--", linewidth=1)
    axis.set_xticks(range(len(readers)), readers, rotation=15)
    axis.set_ylabel("Δ F1 (95% CI)")
    axis.set_title("Submodular packing against naive and focused, by reader")
    axis.grid(alpha=0.3)
    axis.legend(fontsize="small")
    return _save(fig, settings.figures / "reader_ladder.png")
