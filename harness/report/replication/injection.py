"""Seed 001: when to diversify (near-duplicate injection)."""

from __future__ import annotations

import logging
import math

import numpy as np
import pandas as pd

from harness.metrics.registry import (
    S_RECALL,
)
from harness.report.common import Options
from harness.report.diversity import diversity_tables
from harness.report.formatting import fmt, fmt_ci
from harness.report.load import annotate, format_value
from harness.report.plots import plot_diversity
from harness.report.replication.common import (
    INJECTION_DISTRACTOR,
    INJECTION_OPEN,
    Section,
    Settings,
    counted,
    verdict,
)
from harness.report.replication.provenance import study_commands

log = logging.getLogger("harness.report.replication")

# ----------------------------------------------------------------------------------------------------------
# seed 001: injection on open and distractor pools


def _injection_study(rows: pd.DataFrame, settings: Settings):
    rows, layout = annotate(rows)
    options = Options(metric=S_RECALL, n_resamples=settings.n_resamples, study_resamples=1999, seed=settings.seed)
    tables, studies = diversity_tables(rows, layout, options)
    return {t.name: t for t in tables}, studies


def injection_section(settings: Settings) -> Section:
    section = Section("Seed 001: when to diversify (near-duplicate injection)")
    open_rows = settings.load(INJECTION_OPEN)
    distractor_rows = settings.load(INJECTION_DISTRACTOR)
    if open_rows is None and distractor_rows is None:
        return section.missing(INJECTION_OPEN, INJECTION_DISTRACTOR)
    section.add(
        "Claims: diversifying costs recall on clean pools and pays under redundancy, so a rule that "
        "diversifies only when the kNN top-k's Vendi score falls below the question's evidence count h tracks "
        "the envelope of the best fixed method and has the smallest worst-case regret. Seed 001 measures this "
        "on open-retrieval pools of 100 candidates; the 10-paragraph distractor pools are the small-pool "
        "contrast. Test S-Recall@5 at each method's operating point tuned on a 20% validation split, a question's "
        "seeds averaged within it.",
    )
    made = [s for s, r in ((INJECTION_OPEN, open_rows), (INJECTION_DISTRACTOR, distractor_rows)) if r is not None]
    study_commands(section, settings, made, "python -m harness.report replicate")
    for label, rows, study in (
        ("Open retrieval, pools of 100 (HotpotQA fullwiki, AMOR's copy)", open_rows, INJECTION_OPEN),
        ("Distractor, pools of 10 (HotpotQA, the fork's 485 in IRCoT's format)", distractor_rows, INJECTION_DISTRACTOR),
    ):
        section.add("", f"### {label}", "")
        if rows is None:
            section.add("Not run yet:")
            section.command(study.command)
            continue
        tables, studies = _injection_study(rows, settings)
        if "diversity_s_recall" not in tables:
            section.add("The rows do not hold a diversity study (need kNN and at least one other method).")
            continue
        section.add(
            f"{rows['qkey'].nunique()} distinct questions over {counted(rows['seed'].nunique(), 'seed')}, "
            f"{counted(rows['run_dir'].nunique(), 'run')}. Test S-Recall@5 [95% CI]:"
        )
        section.table(tables["diversity_s_recall"].display)
        if "diversity_robustness" not in tables or not studies:
            section.add("Regret, envelope and per-level contrasts need at least two levels of ρ in the runs.")
        else:
            _injection_claims(
                section, tables, studies[0].study, "pools of 100" if study is INJECTION_OPEN else "pools of 10"
            )
        settings.figures.mkdir(parents=True, exist_ok=True)  # this section may be the first to draw
        for i, result in enumerate(studies):
            for path in plot_diversity(result, settings.figures, index=i):
                target = path.with_name(f"injection_{study.directory}_{path.name}")
                path.replace(target)
                section.add("", f"![{label}]({settings.relative(target)})")
    return section


def _injection_claims(section: Section, tables: dict, study, label: str) -> None:
    """Regret, the rule against the envelope, and each method's clean-pool cost and heavy-redundancy gain."""
    robust = tables["diversity_robustness"]
    section.add("Regret against the per-level envelope (best method at that level) and downside against kNN:")
    section.table(robust.display)
    section.add("The rule against the envelope (best fixed method at each level) and the per-query oracle:")
    section.table(_envelope_table(study))
    contrasts = tables["diversity_contrasts"].data
    contrasts = contrasts[contrasts["kind"] == "level"]
    levels = sorted(contrasts["level"].unique())
    clean, heavy = levels[0], levels[-1]
    lines, costly, gains, mdes = [], [], [], []
    for method in sorted(contrasts["method"].unique()):
        at = contrasts[contrasts["method"] == method].set_index("level")
        c, h = at.loc[clean], at.loc[heavy]
        # The paper gives directions, not sizes: an interval including zero reads with its MDE (n queries,
        # α = 0.05, 80% power) so a reader sees what size of effect the design could have detected.
        clean_verdict = verdict(c.ci_low, c.ci_high, direction=-1, mde=c.mde)
        heavy_verdict = verdict(h.ci_low, h.ci_high, mde=h.mde)
        mdes.extend([c.mde, h.mde])
        lines.append(
            f"- {method} − kNN: clean (ρ = {format_value(clean)}) {fmt_ci(c.mean_diff, c.ci_low, c.ci_high)} → "
            f"{clean_verdict}; ρ = {format_value(heavy)} {fmt_ci(h.mean_diff, h.ci_low, h.ci_high)} → {heavy_verdict} "
            f"(n = {c.n})"
        )
        if clean_verdict == "reproduced":
            costly.append(method)
        if heavy_verdict == "reproduced":
            gains.append(method)
    section.add(
        "Per method, the clean-pool cost (paper: below zero) and the heavy-redundancy gain (paper: above zero):",
        "",
        *lines,
    )
    data = robust.data.set_index("method")
    minimax = [m for m in data.index if bool(data.loc[m, "minimax"])]
    if "rule" in data.index:
        rule = data.loc["rule"]
        # A ranking of decision rules has no test of its own; the power shown is that of the paired
        # difference behind the rule's largest regret (the rule against the best method at that level).
        behind = (
            f"against {rule['regret_vs']} at ρ = {format_value(rule['regret_level'])}: "
            f"n = {int(rule['regret_n'])}, MDE {rule['regret_mde']:.3f}"
            if "regret_mde" in data.columns and math.isfinite(float(rule["regret_mde"]))
            else "the best method at every level: no regret to test"
        )
        section.add(
            "",
            f"**Verdict, rule vs envelope: the rule's largest regret is {fmt(rule['max_regret'])} ({behind}); the "
            f"minimax-regret choice is {', '.join(minimax)} → "
            f"{'reproduced' if 'rule' in minimax else 'not reproduced'}.**",
        )
        section.claim(
            f"seed 001: the rule is the minimax-regret choice ({label})",
            "reproduced" if "rule" in minimax else "not reproduced",
            f"rule max regret {fmt(rule['max_regret'])} ({behind}); minimax: {', '.join(minimax)}",
        )
    power = (
        f"MDE {np.nanmin(mdes):.3f}–{np.nanmax(mdes):.3f}"
        if np.isfinite(np.asarray(mdes, dtype=float)).any()
        else "MDE –"
    )
    section.claim(
        f"seed 001: diversifying costs S-Recall on clean pools ({label})",
        f"reproduced for {', '.join(costly)}" if costly else "not reproduced",
        f"{len(costly)} of {len(lines)} methods below kNN at ρ = {format_value(clean)} (CI below zero); {power}",
    )
    section.claim(
        f"seed 001: diversifying pays under heavy redundancy ({label})",
        f"reproduced for {', '.join(gains)}" if gains else "not reproduced",
        f"{len(gains)} of {len(lines)} methods above kNN at ρ = {format_value(heavy)}; {power}",
    )


def _envelope_table(study) -> pd.DataFrame:
    """Per level: kNN, the rule, the best fixed method (the envelope a misspecification-free choice would
    reach), the per-query oracle over all methods, and the rule's gap to the envelope."""
    means = study.means.pivot(index="level", columns="method", values="mean")
    oracle = study.oracles[study.oracles["method"] == "all methods"].set_index("level")["oracle_mean"]
    records = []
    for level, row in means.iterrows():
        best = row.drop(labels=["rule"], errors="ignore").idxmax()
        records.append(
            {
                "ρ": format_value(level),
                study.reference: fmt(row.get(study.reference, math.nan)),
                "rule": fmt(row.get("rule", math.nan)),
                "envelope (best fixed)": f"{fmt(row[best])} ({best})",
                "per-query oracle": fmt(oracle.get(level, math.nan)),
                "rule − envelope": fmt(row.get("rule", math.nan) - row[best]),
            }
        )
    return pd.DataFrame(records)
