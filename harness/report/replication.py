"""``python -m harness.report replicate``: the replication study, docs/replication.md, from the studies' runs.

Each claim of the three papers has a sweep under ``sweeps/replication_*.yaml`` (or an earlier study whose
sweep it shares) that writes into ``outputs/studies/<study>``. This module reads whatever of those
directories exist, computes the tables with the report's own analyses (question-clustered and paired
bootstraps, incremental validity, the diversity study's tuned operating points and regret), gives each
claim a verdict from its confidence interval, draws the figures and writes one markdown file. A study not
run yet is listed with the command that runs it, so the document never shows a figure nobody measured.

Verdicts compare an interval with the paper's direction: *reproduced* when the 95% interval lies on the
paper's side of zero, *reversed* when it lies on the other side, *not reproduced* when it includes zero.
"""

from __future__ import annotations

import argparse
import logging
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from harness.metrics.registry import (
    ALL_GOLD_IN_READER,
    ANSWER_IN_CONTEXT,
    ANSWER_IN_CONTEXT_GRADED,
    CONTEXT_TOKENS,
    F1,
    GOLD_DOC_COVERAGE,
    RECALL_AT_K,
    S_RECALL,
)
from harness.report.diversity import diversity_tables
from harness.report.formatting import fmt, fmt_ci, to_markdown
from harness.report.load import annotate, format_value, load_runs
from harness.report.plots import plot_diversity, reader_scale
from harness.report.tables import Options
from harness.stats.analyses import correlations, incremental_validity, matched_pairs
from harness.stats.bootstrap import clustered_mean_ci

log = logging.getLogger("harness.report.replication")

DEFAULT_STUDIES = Path("outputs/studies")
DEFAULT_OUT = Path("docs/replication.md")


@dataclass(frozen=True)
class Study:
    """One study directory under the studies root and the command that fills it."""

    directory: str
    command: str

    def path(self, root: Path) -> Path:
        return root / self.directory


def _sweep(name: str) -> Study:
    """A study made by ``sweeps/<name>.yaml`` into a directory of the same name."""
    return Study(name, f"python -m harness -m +sweeps={name} hydra.sweep.dir=outputs/studies/{name}")


PACKING = _sweep("replication_packing")
READER_BUDGETS = _sweep("replication_reader_budgets")
# LLMLingua spends seconds compressing each question, so it is read at one budget, in its own directory.
LLMLINGUA = Study(
    "replication_llmlingua",
    "python -m harness -m +sweeps=replication_reader_budgets packer=llmlingua budget=160 "
    "hydra.sweep.dir=outputs/studies/replication_llmlingua",
)
ABLATION = _sweep("packing_ablation")
LADDER = _sweep("replication_ladder")
INJECTION_OPEN = _sweep("replication_injection_open")
INJECTION_DISTRACTOR = Study(
    "injection_distractor",
    "python -m harness -m +sweeps=injection_selection dataset=hotpotqa dataset.sample_size=null "
    "retriever.setting=distractor retriever.pool_size=null hydra.sweep.dir=outputs/studies/injection_distractor",
)
TREES = _sweep("replication_trees")

# The papers' figures the verdicts refer to.
SEED000_TABLE5 = {
    "submod": {ANSWER_IN_CONTEXT: 0.640, GOLD_DOC_COVERAGE: 0.779},
    "packed": {ANSWER_IN_CONTEXT: 0.590, GOLD_DOC_COVERAGE: 0.685},
}
SEED002_BUILD_TIME_CHANGE = -0.81

PACKERS = ("packed", "focused", "mmr", "submod", "llmlingua", "oracle")
PACKER_LABELS = {
    "packed": "naive (top-k, truncate)",
    "focused": "query-focused",
    "mmr": "MMR (λ = 0.7)",
    "submod": "submodular",
    "llmlingua": "LLMLingua",
    "oracle": "oracle",
}


@dataclass
class Settings:
    studies: Path
    out: Path
    n_resamples: int = 10000
    confidence: float = 0.95
    seed: int = 0

    @property
    def figures(self) -> Path:
        return self.out.parent / self.out.stem

    def relative(self, path: Path) -> str:
        return str(path.relative_to(self.out.parent))


@dataclass
class Section:
    title: str
    lines: list[str] = field(default_factory=list)
    verdicts: list[dict[str, str]] = field(default_factory=list)  # the summary table's rows

    def claim(self, claim: str, outcome: str, evidence: str) -> None:
        self.verdicts.append({"claim": claim, "verdict": outcome, "evidence": evidence})

    def add(self, *lines: str) -> None:
        self.lines.extend(lines)

    def table(self, frame: pd.DataFrame) -> None:
        self.lines.extend(["", to_markdown(frame), ""])

    def command(self, *commands: str) -> None:
        self.lines.append("")
        self.lines.extend(f"    {c}" for c in commands)
        self.lines.append("")


# ----------------------------------------------------------------------------------------------------------
# helpers


def verdict(low: float, high: float, direction: int = 1) -> str:
    """The claim's fate from an interval of (ours - theirs-baseline) in the paper's direction (+1 or -1)."""
    if not (math.isfinite(low) and math.isfinite(high)):
        return "not testable (no interval)"
    low, high = (low, high) if direction > 0 else (-high, -low)
    if low > 0:
        return "reproduced"
    if high < 0:
        return "reversed"
    return "not reproduced (the interval includes zero)"


def _diff(result: dict) -> str:
    return fmt_ci(result["mean_diff"], result["ci_low"], result["ci_high"])


def _load(settings: Settings, *studies: Study) -> pd.DataFrame | None:
    """The rows of those of the studies that have been run (None when none has)."""
    paths = [s.path(settings.studies) for s in studies if s.path(settings.studies).is_dir()]
    if not paths:
        return None
    try:
        rows, _ = load_runs(paths)
    except (FileNotFoundError, ValueError) as error:
        log.warning("%s: %s", ", ".join(map(str, paths)), error)
        return None
    return rows


def _missing(section: Section, *studies: Study) -> Section:
    section.add("**Not run yet.** The runs this section needs are made by:")
    section.command(*(s.command for s in studies))
    return section


def _contrast(rows: pd.DataFrame, column: str, a, b, metric: str, settings: Settings) -> dict:
    """Policy a minus policy b on ``metric``, paired on (question, seed), pooled like the tables' means
    (a question drawn by two seeds counts twice) with a bootstrap that resamples whole questions.
    ``unique_diff`` is the same difference with each question counted once."""
    pairs = matched_pairs(rows[rows[column] == a], rows[rows[column] == b], metric, question="qkey")
    pairs = pairs.dropna(subset=["a", "b"]).assign(d=lambda f: f["a"] - f["b"])
    mean, low, high = clustered_mean_ci(
        pairs, ["d"], "question", settings.n_resamples, settings.confidence, settings.seed
    )["d"]
    unique = pairs.groupby("question")["d"].mean().mean() if len(pairs) else math.nan
    return {
        "mean_diff": mean,
        "ci_low": low,
        "ci_high": high,
        "n": len(pairs),
        "unique_diff": float(unique),
        "won": int((pairs["d"] > 0).sum()),
        "lost": int((pairs["d"] < 0).sum()),
    }


def _mean_ci(rows: pd.DataFrame, metric: str, settings: Settings) -> tuple[float, float, float]:
    return clustered_mean_ci(rows, [metric], "qkey", settings.n_resamples, settings.confidence, settings.seed)[metric]


def _paper_gap(metric: str) -> float:
    return SEED000_TABLE5["submod"][metric] - SEED000_TABLE5["packed"][metric]


def _mean_diff(results: dict[str, dict], name: str) -> float:
    return results[name]["mean_diff"] if name in results else math.nan


def _ordered_packers(rows: pd.DataFrame) -> list[str]:
    present = set(rows["packer"].astype(str))
    return [p for p in PACKERS if p in present] + sorted(present - set(PACKERS))


def _save(fig: Figure, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=150)
    return path


def _overrides(run_dir: str) -> list[str]:
    path = Path(run_dir) / ".hydra" / "overrides.yaml"
    if not path.is_file():
        return []
    import yaml

    return [str(o) for o in yaml.safe_load(path.read_text()) or []]


# ----------------------------------------------------------------------------------------------------------
# seed 000: packing table


PACKING_METRICS = (ANSWER_IN_CONTEXT, ANSWER_IN_CONTEXT_GRADED, GOLD_DOC_COVERAGE, ALL_GOLD_IN_READER, CONTEXT_TOKENS)
PACKING_HEADINGS = {
    ANSWER_IN_CONTEXT: "AiC",
    ANSWER_IN_CONTEXT_GRADED: "graded AiC",
    GOLD_DOC_COVERAGE: "gold coverage",
    ALL_GOLD_IN_READER: "all gold",
    CONTEXT_TOKENS: "tokens",
}


def packing_section(settings: Settings) -> Section:
    section = Section("Seed 000: budgeted packing (Table 5)")
    rows = _load(settings, PACKING)
    if rows is None:
        return _missing(section, PACKING, READER_BUDGETS, LLMLINGUA)
    read = _load(settings, READER_BUDGETS, LLMLINGUA)
    n_q = rows.groupby("seed")["qkey"].nunique()
    section.add(
        "Claim: under a reader budget the submodular packer puts the answer in the reader's context more often",
        "than naive top-k packing (seed 000, Table 5, B = 160: answer-in-context 0.640 vs 0.590; gold coverage",
        "0.779 vs 0.685).",
        "",
        f"Setting: HotpotQA distractor sample, every packer choosing from the whole 10-paragraph pool, "
        f"{len(n_q)} seeds ({', '.join(str(s) for s in n_q.index)}) each drawing {int(n_q.iloc[0])} of the 100 "
        "questions; selection columns need no reader. Means pooled over seeds with 95% intervals from a bootstrap "
        "that resamples questions. "
        + (
            f"F1: {read['reader'].iloc[0]} (llama.cpp) reading the same packers' contexts on "
            f"{read['qkey'].nunique()} questions of seed {int(read['seed'].iloc[0])}."
            if read is not None
            else "F1: not run yet (`" + READER_BUDGETS.command + "`)."
        ),
    )
    section.command(PACKING.command, READER_BUDGETS.command, LLMLINGUA.command, "python -m harness.report replicate")
    records = []
    for budget in sorted(rows["budget"].unique()):
        for packer in _ordered_packers(pd.concat([rows, read]) if read is not None else rows):
            cell = rows[(rows["budget"] == budget) & (rows["packer"] == packer)]
            scored = read[(read["budget"] == budget) & (read["packer"] == packer)] if read is not None else cell[:0]
            # A packer left out of the selection grid (LLMLingua: seconds of compression per question) is
            # described by the reader runs' own rows.
            source = cell if len(cell) else scored
            if not len(source):
                continue
            record = {"B": int(budget), "packer": PACKER_LABELS.get(packer, packer)}
            record["n"] = (
                f"{len(source)} ({source['seed'].nunique()} seed{'s' if source['seed'].nunique() > 1 else ''})"
            )
            summary = clustered_mean_ci(
                source, list(PACKING_METRICS), "qkey", settings.n_resamples, settings.confidence, settings.seed
            )
            for metric in PACKING_METRICS:
                mean, low, high = summary[metric]
                record[PACKING_HEADINGS[metric]] = (
                    f"{mean:.1f}" if metric == CONTEXT_TOKENS else fmt_ci(mean, low, high)
                )
            if read is not None:
                record["F1"] = fmt_ci(*_mean_ci(scored, F1, settings)) if len(scored) else "–"
            records.append(record)
    section.table(pd.DataFrame(records))

    contrasts = []
    for budget in sorted(rows["budget"].unique()):
        at_budget = rows[rows["budget"] == budget]
        record = {"B": int(budget)}
        for metric in (ANSWER_IN_CONTEXT, GOLD_DOC_COVERAGE, ALL_GOLD_IN_READER):
            result = _contrast(at_budget, "packer", "submod", "packed", metric, settings)
            record[f"Δ {PACKING_HEADINGS[metric]}"] = _diff(result)
            record[f"_{metric}"] = result
        if read is not None:
            scored = read[read["budget"] == budget]
            if {"submod", "packed"} <= set(scored["packer"]):
                result = _contrast(scored, "packer", "submod", "packed", F1, settings)
                record["Δ F1"] = _diff(result)
        contrasts.append(record)
    shown = pd.DataFrame([{k: v for k, v in r.items() if not k.startswith("_")} for r in contrasts])
    section.add(
        "Submodular − naive, paired on (question, seed) and pooled like the means above; intervals resample questions:"
    )
    section.table(shown)
    at_160 = next((r for r in contrasts if r["B"] == 160), contrasts[len(contrasts) // 2])
    aic, cov = at_160[f"_{ANSWER_IN_CONTEXT}"], at_160[f"_{GOLD_DOC_COVERAGE}"]
    section.add(
        f"**Verdict (B = {at_160['B']}): answer-in-context {verdict(aic['ci_low'], aic['ci_high'])}** "
        f"(submod − naive {_diff(aic)}, paper {_paper_gap(ANSWER_IN_CONTEXT):+.3f}); **gold coverage "
        f"{verdict(cov['ci_low'], cov['ci_high'])}** (submod − naive {_diff(cov)}, paper "
        f"{_paper_gap(GOLD_DOC_COVERAGE):+.3f}). Counting each question once instead of once per seed that drew "
        f"it, the answer-in-context difference is {aic['unique_diff']:+.3f}.",
    )
    section.claim(
        f"seed 000: submod > naive on answer-in-context (B = {at_160['B']})",
        verdict(aic["ci_low"], aic["ci_high"]),
        f"{_diff(aic)} vs paper {_paper_gap(ANSWER_IN_CONTEXT):+.3f}",
    )
    section.claim(
        f"seed 000: submod > naive on gold coverage (B = {at_160['B']})",
        verdict(cov["ci_low"], cov["ci_high"]),
        f"{_diff(cov)} vs paper {_paper_gap(GOLD_DOC_COVERAGE):+.3f}",
    )
    section.add("", *_packing_diagnosis(rows[rows["budget"] == at_160["B"]], at_160["B"]))
    figure = _packing_figure(rows, read, settings)
    section.add("", f"![answer-in-context and F1 by budget]({settings.relative(figure)})")
    return section


def _packing_diagnosis(rows: pd.DataFrame, budget: int) -> list[str]:
    """Where the answer goes: how often each packer brings every gold document, how often the answer comes
    with them, and how the budget is spent (snippets, share of tokens from gold documents)."""
    records = []
    for packer in _ordered_packers(rows):
        cell = rows[rows["packer"] == packer]
        all_gold = cell[cell[ALL_GOLD_IN_READER] == 1]
        records.append(
            {
                "packer": PACKER_LABELS.get(packer, packer),
                "all gold in context": fmt(cell[ALL_GOLD_IN_READER].mean()),
                "AiC when all gold": fmt(all_gold[ANSWER_IN_CONTEXT].mean()) if len(all_gold) else "–",
                "snippets": f"{cell['n_snippets'].mean():.1f}",
                "gold-token density": fmt(cell["gold_token_density"].mean()),
            }
        )
    frame = pd.DataFrame(records)
    by_packer = frame.set_index("packer")
    submod, naive = by_packer.loc[PACKER_LABELS["submod"]], by_packer.loc[PACKER_LABELS["packed"]]
    return [
        f"Why (B = {budget}, same rows): submod brings every gold document into the context more often than "
        f"naive packing ({submod['all gold in context']} vs {naive['all gold in context']}), but with them the "
        f"answer less often ({submod['AiC when all gold']} vs {naive['AiC when all gold']}): it spends the budget "
        f"on more, shorter snippets ({submod['snippets']} vs {naive['snippets']}) and less of it on gold documents "
        f"(gold-token density {submod['gold-token density']} vs {naive['gold-token density']}). Coverage terms "
        "reward touching each gold document with a sentence that matches the question; the answer-bearing "
        "sentence is often not that one.",
        "",
        to_markdown(frame),
    ]


def _packing_figure(rows: pd.DataFrame, read: pd.DataFrame | None, settings: Settings) -> Path:
    panels = [(rows, ANSWER_IN_CONTEXT, "answer in context"), (rows, GOLD_DOC_COVERAGE, "gold coverage")]
    if read is not None:
        panels.append((read, F1, f"F1 ({read['reader'].iloc[0]})"))
    fig = Figure(figsize=(5.0 * len(panels), 4.2))
    for i, (frame, metric, label) in enumerate(panels):
        axis = fig.add_subplot(1, len(panels), i + 1)
        for packer in _ordered_packers(frame):
            points = []
            for budget in sorted(frame["budget"].unique()):
                cell = frame[(frame["budget"] == budget) & (frame["packer"] == packer)]
                if len(cell):
                    points.append((budget, *_mean_ci(cell, metric, settings)))
            if not points:
                continue
            b, mean, low, high = (np.array(v, dtype=float) for v in zip(*points, strict=True))
            axis.errorbar(
                b, mean, yerr=[mean - low, high - mean], marker="o", capsize=3, label=PACKER_LABELS.get(packer, packer)
            )
        axis.set_xlabel("budget B (reader tokens)")
        axis.set_ylabel(label)
        axis.grid(alpha=0.3)
    fig.axes[0].legend(fontsize="small")
    return _save(fig, settings.figures / "packing_budget.png")


# ----------------------------------------------------------------------------------------------------------
# seed 000: packing ablation


def _ablation_label(run_dir: str) -> str:
    for override in _overrides(run_dir):
        if override.startswith("+sweeps/packing_ablation="):
            return override.split("=", 1)[1]
    return Path(run_dir).name


def ablation_section(settings: Settings) -> Section:
    section = Section("Seed 000: what explains the packing result (ablation)")
    rows = _load(settings, ABLATION)
    if rows is None:
        return _missing(section, ABLATION)
    rows = rows.assign(setting=rows["run_dir"].map(_ablation_label))
    baseline = "packed_truncate_last"
    if baseline not in set(rows["setting"]):
        section.add(f"The ablation lacks its baseline run `{baseline}`.")
        return section
    section.add(
        "The choices the method leaves open are config keys: `packer.rel` (lexical | bm25 | dense), "
        "`packer.normalise` (ground_set | none), `packer.cost_scaled`, `packer.max_snippets`, `snippets.unit` "
        "(sentence | window | candidate) and the naive packer's `packer.misfit`. The sweep changes one at a "
        f"time on {rows['qkey'].nunique()} questions at B = {int(rows['budget'].iloc[0])} (selection only).",
    )
    section.command(ABLATION.command, "python -m harness.report replicate")
    default = rows[rows["setting"] == "submod"]
    records, results = [], {}
    for setting in dict.fromkeys(rows["setting"]):
        cell = rows[rows["setting"] == setting]
        summary = clustered_mean_ci(
            cell,
            [ANSWER_IN_CONTEXT, GOLD_DOC_COVERAGE, ALL_GOLD_IN_READER],
            "qkey",
            settings.n_resamples,
            settings.confidence,
            settings.seed,
        )
        record = {"setting": setting}
        for metric in (ANSWER_IN_CONTEXT, GOLD_DOC_COVERAGE, ALL_GOLD_IN_READER):
            record[PACKING_HEADINGS[metric]] = fmt_ci(*summary[metric])
        record["tokens"] = f"{cell[CONTEXT_TOKENS].mean():.1f}"
        if setting != baseline:
            result = _contrast(rows, "setting", setting, baseline, ANSWER_IN_CONTEXT, settings)
            results[setting] = result
            record["Δ AiC vs naive [CI] (won/lost)"] = f"{_diff(result)} ({result['won']}/{result['lost']})"
        else:
            record["Δ AiC vs naive [CI] (won/lost)"] = "—"
        if len(default) and setting != "submod" and not setting.startswith("packed"):
            changed = default[["qkey", "context"]].merge(cell[["qkey", "context"]], on="qkey")
            record["contexts changed vs default"] = int((changed["context_x"] != changed["context_y"]).sum())
        else:
            record["contexts changed vs default"] = "—"
        records.append(record)
    section.table(pd.DataFrame(records))
    submod_settings = {s: r for s, r in results.items() if not s.startswith("packed")}
    winners = [s for s, r in submod_settings.items() if r["ci_low"] > 0]
    losers = [s for s, r in submod_settings.items() if r["ci_high"] < 0]
    best = max(submod_settings, key=lambda s: submod_settings[s]["mean_diff"])
    if winners:
        section.add(f"**Settings under which submod beats naive packing on answer-in-context: {', '.join(winners)}.**")
    else:
        section.add(
            "**No setting makes submod beat naive packing on answer-in-context with an interval above zero.** "
            f"The closest is `{best}`: {_diff(submod_settings[best])}."
        )
    section.claim(
        "seed 000 ablation: a setting under which submod beats naive on answer-in-context",
        ", ".join(winners) if winners else "none",
        f"closest `{best}` {_diff(submod_settings[best])}",
    )
    if losers:
        section.add(f"Settings that lose significantly: {', '.join(f'`{s}`' for s in losers)}.")
    d_cov = _contrast(rows, "setting", "submod", baseline, GOLD_DOC_COVERAGE, settings)
    d_all = _contrast(rows, "setting", "submod", baseline, ALL_GOLD_IN_READER, settings)
    section.add(
        "",
        f"Default submod − naive: gold coverage {_diff(d_cov)}, all gold {_diff(d_all)}, answer-in-context "
        f"{_diff(results['submod'])}: the coverage gain does not carry the answer (the diagnosis under the "
        "packing table measures where the budget goes). Settings with a point estimate above naive packing: "
        + (
            ", ".join(f"`{name}` ({fmt(r['mean_diff'])})" for name, r in submod_settings.items() if r["mean_diff"] > 0)
            or "none"
        )
        + ". Gain per token (`cost_scaled`) favours short sentences that repeat the question's terms.",
    )
    return section


# ----------------------------------------------------------------------------------------------------------
# seed 000: reader ladder and validity


def _reader_order(rows: pd.DataFrame) -> list[str]:
    return sorted(rows["reader"].astype(str).unique(), key=lambda r: (reader_scale(r), r))


def ladder_section(settings: Settings) -> Section:
    section = Section("Seed 000: the reader ladder and the validity of answer-in-context")
    rows = _load(settings, LADDER)
    if rows is None:
        return _missing(section, LADDER)
    readers = _reader_order(rows)
    section.add(
        "Claims: the submodular packer's advantage reaches the reader's answers (F1), and answer-in-context "
        "explains reader accuracy beyond recall@k (incremental R², question-clustered interval).",
        "",
        f"Setting: {rows['qkey'].nunique()} HotpotQA distractor questions (seed {int(rows['seed'].iloc[0])}), "
        f"B = {int(rows['budget'].iloc[0])}, {rows['packer'].nunique()} packers, readers {', '.join(readers)} "
        "(GGUF through llama.cpp, "
        "greedy). The papers' readers (Qwen2.5 3B-32B) are configs (`reader=qwen2.5_7b` ...) for machines that "
        "have their weights; this ladder is what loads offline.",
    )
    section.command(LADDER.command, "python -m harness.report replicate")
    means, contrasts, validity = [], [], []
    for reader in readers:
        at_reader = rows[rows["reader"] == reader]
        record = {"reader": reader}
        for packer in _ordered_packers(at_reader):
            record[PACKER_LABELS.get(packer, packer)] = fmt(at_reader.loc[at_reader["packer"] == packer, F1].mean())
        means.append(record)
        for other in ("packed", "focused"):
            if {"submod", other} <= set(at_reader["packer"]):
                result = _contrast(at_reader, "packer", "submod", other, F1, settings)
                contrasts.append({"reader": reader, "contrast": f"submod − {other}", **result})
        complete = at_reader.dropna(subset=[F1, RECALL_AT_K, ANSWER_IN_CONTEXT])
        try:
            iv = incremental_validity(
                complete,
                outcome=F1,
                base=RECALL_AT_K,
                added=ANSWER_IN_CONTEXT,
                cluster="qkey",
                n_resamples=settings.n_resamples,
                confidence=settings.confidence,
                seed=settings.seed,
            )
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
            "verdict": [verdict(r["ci_low"], r["ci_high"]) for r in contrasts],
        }
    )[["reader", "contrast", "Δ F1 [CI]", "won / lost", "verdict"]]
    section.add("Paired contrasts on F1 (95% paired bootstrap over questions):")
    section.table(shown)
    if validity:
        section.add("Validity of answer-in-context (rows: every packer x question of one reader):")
        section.table(pd.DataFrame([{k: v for k, v in r.items() if k != "_iv"} for r in validity]))
        strongest = validity[-1]
        iv = strongest["_iv"]
        section.add(
            f"**Verdict, validity (strongest rung, {strongest['reader']}): "
            f"{verdict(iv['delta_r2_ci_low'], iv['delta_r2_ci_high'])}** — ΔR² {strongest['ΔR² [clustered CI]']}. "
            "Up the ladder r(AiC, F1) goes "
            + " → ".join(v["r(AiC, F1)"] for v in validity)
            + ": the diagnostic is only as valid as the reader is able to use the context.",
            "",
        )
        section.claim(
            f"seed 000: answer-in-context explains F1 beyond recall@5 ({strongest['reader']})",
            verdict(iv["delta_r2_ci_low"], iv["delta_r2_ci_high"]),
            f"ΔR² {strongest['ΔR² [clustered CI]']}",
        )
    top = [r for r in contrasts if r["reader"] == readers[-1]]
    if top:
        section.add(
            "**Verdict, reader-side gain (strongest rung): "
            + "; ".join(f"{r['contrast']} {verdict(r['ci_low'], r['ci_high'])} ({_diff(r)})" for r in top)
            + ".**"
        )
        strongest_rows = rows[rows["reader"] == readers[-1]]
        aic = _contrast(strongest_rows, "packer", "submod", "packed", ANSWER_IN_CONTEXT, settings)
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
        for r in top:
            section.claim(
                f"seed 000: {r['contrast']} > 0 on F1 ({r['reader']})", verdict(r["ci_low"], r["ci_high"]), _diff(r)
            )
    figure = _ladder_figure(contrasts, readers, settings)
    section.add("", f"![submod contrasts by reader]({settings.relative(figure)})")
    return section


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


# ----------------------------------------------------------------------------------------------------------
# seed 001: injection on open and distractor pools


def _injection_study(rows: pd.DataFrame, settings: Settings):
    rows, layout = annotate(rows)
    options = Options(metric=S_RECALL, n_resamples=settings.n_resamples, study_resamples=1999, seed=settings.seed)
    tables, studies = diversity_tables(rows, layout, options)
    return {t.name: t for t in tables}, studies


def injection_section(settings: Settings) -> Section:
    section = Section("Seed 001: when to diversify (near-duplicate injection)")
    open_rows = _load(settings, INJECTION_OPEN)
    distractor_rows = _load(settings, INJECTION_DISTRACTOR)
    if open_rows is None and distractor_rows is None:
        return _missing(section, INJECTION_OPEN, INJECTION_DISTRACTOR)
    section.add(
        "Claims: diversifying costs recall on clean pools and pays under redundancy, so a rule that "
        "diversifies only when the kNN top-k's Vendi score falls below the question's evidence count h tracks "
        "the envelope of the best fixed method and has the smallest worst-case regret. Seed 001 measures this "
        "on open-retrieval pools of 100 candidates; the 10-paragraph distractor pools are the small-pool "
        "contrast. Test S-Recall@5 at each method's operating point tuned on a 20% validation split, 3 seeds "
        "averaged within a question.",
    )
    section.command(INJECTION_OPEN.command, INJECTION_DISTRACTOR.command, "python -m harness.report replicate")
    for label, rows, study in (
        ("Open retrieval, pools of 100 (HotpotQA fullwiki sample)", open_rows, INJECTION_OPEN),
        ("Distractor, pools of 10 (HotpotQA distractor sample)", distractor_rows, INJECTION_DISTRACTOR),
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
            f"{rows['qkey'].nunique()} distinct questions over {rows['seed'].nunique()} seeds, "
            f"{rows['run_dir'].nunique()} runs. Test S-Recall@5 [95% CI]:"
        )
        section.table(tables["diversity_s_recall"].display)
        if "diversity_robustness" not in tables or not studies:
            section.add("Regret, envelope and per-level contrasts need at least two levels of ρ in the runs.")
        else:
            _injection_claims(
                section, tables, studies[0].study, "pools of 100" if study is INJECTION_OPEN else "pools of 10"
            )
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
    lines, costly, gains = [], [], []
    for method in sorted(contrasts["method"].unique()):
        at = contrasts[contrasts["method"] == method].set_index("level")
        c, h = at.loc[clean], at.loc[heavy]
        clean_verdict, heavy_verdict = verdict(c.ci_low, c.ci_high, direction=-1), verdict(h.ci_low, h.ci_high)
        lines.append(
            f"- {method} − kNN: clean (ρ = {format_value(clean)}) {fmt_ci(c.mean_diff, c.ci_low, c.ci_high)} → "
            f"{clean_verdict}; ρ = {format_value(heavy)} {fmt_ci(h.mean_diff, h.ci_low, h.ci_high)} → {heavy_verdict}"
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
        section.add(
            "",
            f"**Verdict, rule vs envelope: the rule's largest regret is {fmt(rule['max_regret'])}; the "
            f"minimax-regret choice is {', '.join(minimax)} → "
            f"{'reproduced' if 'rule' in minimax else 'not reproduced'}.**",
        )
        section.claim(
            f"seed 001: the rule is the minimax-regret choice ({label})",
            "reproduced" if "rule" in minimax else "not reproduced",
            f"rule max regret {fmt(rule['max_regret'])}; minimax: {', '.join(minimax)}",
        )
    section.claim(
        f"seed 001: diversifying costs S-Recall on clean pools ({label})",
        f"reproduced for {', '.join(costly)}" if costly else "not reproduced",
        f"{len(costly)} of {len(lines)} methods below kNN at ρ = {format_value(clean)} (CI below zero)",
    )
    section.claim(
        f"seed 001: diversifying pays under heavy redundancy ({label})",
        f"reproduced for {', '.join(gains)}" if gains else "not reproduced",
        f"{len(gains)} of {len(lines)} methods above kNN at ρ = {format_value(heavy)}",
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
        for column, quantity, paper in (
            ("tree.build_seconds", "build time", f"{SEED002_BUILD_TIME_CHANGE:+.0%}".replace("-", "−")),
            ("tree.summary_nodes", "summary nodes", "fewer"),
            ("tree.lm_prompt_tokens", "LM prompt tokens", None),
        ):
            if column not in dtcrs or dtcrs[column].isna().all():
                continue
            a, b = dtcrs[column].to_numpy(float), raptor[column].to_numpy(float)
            change = a.sum() / b.sum() - 1 if b.sum() else math.nan
            low, high = _ratio_ci(a, b, settings)
            outcome = verdict(low, high, direction=-1)
            figure = f"{change:+.0%} [{low:+.0%}, {high:+.0%}]"
            verdicts.append(f"- {dataset}: {quantity} {figure}" + (f" (paper {paper}) → {outcome}" if paper else ""))
            if paper:
                section.claim(
                    f"seed 002: DTCRS below RAPTOR on {quantity} ({dataset})",
                    outcome,
                    f"{figure} vs paper {paper}",
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


def _ratio_ci(a: np.ndarray, b: np.ndarray, settings: Settings) -> tuple[float, float]:
    """Percentile interval of sum(a)/sum(b) - 1 from independent resamples of a's and b's builds."""
    rng = np.random.default_rng(settings.seed)
    n = min(settings.n_resamples, 5000)
    ra = a[rng.integers(0, a.size, size=(n, a.size))].sum(axis=1)
    rb = b[rng.integers(0, b.size, size=(n, b.size))].sum(axis=1)
    ratios = ra / rb - 1
    tail = (1 - settings.confidence) / 2
    return float(np.quantile(ratios, tail)), float(np.quantile(ratios, 1 - tail))


# ----------------------------------------------------------------------------------------------------------
# the document

SECTIONS: Sequence[Callable[[Settings], Section]] = (
    packing_section,
    ablation_section,
    ladder_section,
    injection_section,
    trees_section,
)


def render(settings: Settings) -> str:
    parts = [
        "# Replication study",
        "",
        "Generated by `python -m harness.report replicate` from the runs under "
        f"`{settings.studies}`; do not edit by hand. Each section gives the paper's claim, the command that "
        "made its runs, the tables with 95% intervals and a verdict: *reproduced* (interval on the paper's "
        "side of zero), *reversed* (on the other side), *not reproduced* (includes zero).",
    ]
    sections = []
    for build in SECTIONS:
        log.info("section: %s", build.__name__)
        sections.append(build(settings))
    summary = [v for section in sections for v in section.verdicts]
    if summary:
        parts += ["", "## Verdicts", "", to_markdown(pd.DataFrame(summary))]
    for section in sections:
        parts += ["", f"## {section.title}", "", *section.lines]
    return "\n".join(parts).rstrip() + "\n"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m harness.report replicate",
        description="Write the replication study (markdown + PNG figures) from the study directories "
        "under --studies. Sections whose runs are missing list the command that makes them.",
    )
    parser.add_argument(
        "--studies", type=Path, default=DEFAULT_STUDIES, help=f"study root (default: {DEFAULT_STUDIES})"
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=DEFAULT_OUT,
        help=f"markdown file (default: {DEFAULT_OUT}); figures go to a folder of the same stem",
    )
    parser.add_argument("--resamples", type=int, default=10000, help="bootstrap resamples (default: 10000)")
    parser.add_argument("--seed", type=int, default=0, help="seed of every resampling (default: 0)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    settings = Settings(studies=args.studies, out=args.out, n_resamples=args.resamples, seed=args.seed)
    text = render(settings)
    settings.out.parent.mkdir(parents=True, exist_ok=True)
    settings.out.write_text(text)
    print(f"wrote {settings.out} ({len(text.splitlines())} lines) and figures in {settings.figures}")
    return 0
