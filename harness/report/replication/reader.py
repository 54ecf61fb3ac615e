"""Seed 000's reader columns at a larger n: every packer's contexts read on the HotpotQA (IRCoT format) questions."""

from __future__ import annotations

import pandas as pd

from harness.metrics.registry import ANSWER_IN_CONTEXT, EM, F1
from harness.report.formatting import fmt_ci
from harness.report.replication.common import (
    PACKER_LABELS,
    PACKING_HEADINGS,
    READ_HEADINGS,
    READER_IRCOT,
    Section,
    Settings,
    _diff,
    _evidence,
    _ordered_packers,
    _verdict,
    read_with,
)
from harness.report.replication.provenance import study_commands
from harness.report.run_sources import data_files

# Reader-scored contrasts of the powered reader study: the paper's comparison, the heuristic it beats, and
# the headroom an oracle leaves.
READER_CONTRASTS = (("submod", "packed"), ("submod", "focused"), ("oracle", "submod"))


def reader_columns_section(settings: Settings) -> Section:
    section = Section("Seed 000: reader columns at a larger n (HotpotQA (IRCoT format))")
    rows = settings.load(READER_IRCOT)
    if rows is None:
        return section.missing(READER_IRCOT)
    reader = ", ".join(sorted(rows["reader"].astype(str).unique()))
    budget = int(rows["budget"].iloc[0])
    section.add(
        "Claim: what the submodular packer adds to the context shows in the reader's answers (seed 000 reports "
        "F1 beside answer-in-context for every packer).",
        "",
        f"Setting: {read_with(rows)} reads the contexts of each packer at B = {budget} on "
        f"{rows['qkey'].nunique()} HotpotQA (IRCoT format) questions (seed {int(rows['seed'].iloc[0])}; data: "
        f"{data_files(rows)}): the strongest "
        "offline rung, beside the default reader of the packing table's F1 and EM columns.",
    )
    study_commands(section, settings, [READER_IRCOT], "python -m harness.report replicate")
    metrics = (F1, EM, ANSWER_IN_CONTEXT)
    records = []
    for packer in _ordered_packers(rows):
        cell = rows[rows["packer"] == packer]
        summary = settings.means(cell, metrics)
        record = {"packer": PACKER_LABELS.get(packer, packer), "n": len(cell)}
        record.update({HEADINGS[m]: fmt_ci(*summary[m]) for m in metrics})
        records.append(record)
    section.table(pd.DataFrame(records))
    contrasts = []
    for a, b in READER_CONTRASTS:
        if not {a, b} <= set(rows["packer"].astype(str)):
            continue
        for metric in metrics:
            result = settings.contrast(rows, "packer", a, b, metric)
            contrasts.append(
                {
                    "contrast": f"{a} − {b}",
                    "metric": HEADINGS[metric],
                    "Δ [CI]": _diff(result),
                    "n": result["n_questions"],
                    "SD": f"{result['sd']:.3f}",
                    "MDE": f"{result['mde']:.3f}",
                    "verdict": _verdict(result),
                    "_result": result,
                }
            )
    section.add("Paired contrasts (n questions, SD of the per-question differences, MDE at α = 0.05 and 80% power):")
    section.table(pd.DataFrame([{k: v for k, v in c.items() if not k.startswith("_")} for c in contrasts]))
    for contrast in contrasts:
        if contrast["contrast"] == "submod − packed" and contrast["metric"] == "F1":
            result = contrast["_result"]
            section.claim(
                f"seed 000: submod > naive on reader F1 (B = {budget}, {reader})", _verdict(result), _evidence(result)
            )
    return section


HEADINGS = {**READ_HEADINGS, ANSWER_IN_CONTEXT: PACKING_HEADINGS[ANSWER_IN_CONTEXT]}
