"""Seed 000's packing table (Table 5): the budgeted packers compared, the contrasts, the diagnosis and the
figure (the ablation is in ``ablation``, the reader columns at a larger n in ``reader``)."""

from __future__ import annotations

import logging
import math
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from harness.metrics.registry import (
    ALL_GOLD_IN_READER,
    ANSWER_IN_CONTEXT,
    CONTEXT_TOKENS,
    F1,
    GOLD_DOC_COVERAGE,
)
from harness.report.formatting import fmt, fmt_ci, to_markdown
from harness.report.replication.common import (
    LLMLINGUA,
    PACKER_LABELS,
    PACKING,
    PACKING_DATASETS,
    PACKING_HEADINGS,
    PACKING_METRICS,
    READ_HEADINGS,
    READ_METRICS,
    READER_BUDGETS,
    Section,
    Settings,
    _diff,
    _evidence,
    _ordered_packers,
    _paper_gap,
    _power,
    _save,
    _verdict,
    counted,
    read_with,
    viewer_links,
)
from harness.report.replication.provenance import study_commands
from harness.report.run_sources import data_files
from harness.report.viewer.data import variant_label

log = logging.getLogger("harness.report.replication")


def seeds_repeat(rows: pd.DataFrame, metrics: list[str] | tuple[str, ...]) -> bool:
    """True when two or more seeds draw the same questions and give identical rows on ``metrics``.

    Rows are matched on question and on whichever of dataset, budget and packer the frame has; NaN
    equals NaN. Seeds that repeat one sample add rows but no information.
    """
    if "seed" not in rows.columns or rows["seed"].nunique() < 2:
        return False
    keys = [c for c in ("dataset", "qkey", "budget", "packer") if c in rows.columns]
    columns = [m for m in metrics if m in rows.columns]
    first: pd.DataFrame | None = None
    for _, one_seed in rows.groupby("seed", sort=True):
        frame = pd.DataFrame(one_seed.set_index(keys)[columns]).sort_index()
        if frame.index.has_duplicates:
            return False
        if first is None:
            first = frame
        elif not (
            frame.index.equals(first.index)
            and np.array_equal(frame.to_numpy(dtype=float), first.to_numpy(dtype=float), equal_nan=True)
        ):
            return False
    return True


def row_count(rows: pd.DataFrame, metrics: list[str] | tuple[str, ...]) -> str:
    """``"1455 rows (3 seeds, 485 distinct questions; the seeds repeat the same sample)"``, the last clause
    only when :func:`seeds_repeat` holds."""
    n_seeds = rows["seed"].nunique() if "seed" in rows.columns else 1
    label = f"{len(rows)} rows ({counted(n_seeds, 'seed')}, {rows['qkey'].nunique()} distinct questions"
    return label + ("; the seeds repeat the same sample)" if seeds_repeat(rows, metrics) else ")")


COMPRESSION_METHODS = {"llmlingua-1": "LongLLMLingua's question-aware compression", "llmlingua-2": "LLMLingua-2"}


def compressed_with(read: pd.DataFrame | None) -> str:
    """How the LLMLingua rows were compressed: method, language model and its numerics, as the rows say."""
    if read is None or "pack.method" not in read.columns:
        return ""
    cell = read[read["packer"] == "llmlingua"]
    columns = [c for c in ("pack.method", "pack.model", "pack.numerics") if c in cell.columns]
    ways = [
        f"{COMPRESSION_METHODS.get(method, method)} over {model}" + (f" in {rest[0]}" if rest else "")
        for method, model, *rest in cell[columns].astype(str).drop_duplicates().itertuples(index=False)
    ]
    return f" LLMLingua: {'; '.join(ways)}." if ways else ""


def packing_section(settings: Settings) -> Section:
    section = Section("Seed 000: budgeted packing (Table 5)")
    rows = settings.load(PACKING)
    if rows is None:
        return section.missing(PACKING, READER_BUDGETS, LLMLINGUA)
    read = settings.load(READER_BUDGETS, LLMLINGUA)
    read_by = read_with(read) if read is not None else ""
    n_q = rows.groupby("seed")["qkey"].nunique()
    section.add(
        "Claim: under a reader budget the submodular packer puts the answer in the reader's context more often",
        "than naive top-k packing (seed 000, Table 5, B = 160: answer-in-context 0.640 vs 0.590; gold coverage",
        "0.779 vs 0.685).",
        "",
        f"Setting: {', '.join(sorted(rows['dataset'].astype(str).unique()))} (data: {data_files(rows)}), every "
        "packer choosing from the whole "
        f"pool, {counted(len(n_q), 'seed')} ({', '.join(str(s) for s in n_q.index)}) of {int(n_q.iloc[0])} "
        f"questions {'each ' if len(n_q) > 1 else ''}"
        f"({rows['qkey'].nunique()} distinct"
        + (
            "; the seeds draw the same questions and give identical rows, so they repeat one sample"
            if seeds_repeat(rows, PACKING_METRICS)
            else ""
        )
        + "); selection columns need no reader. Means pooled over seeds with 95% intervals from a bootstrap "
        "that resamples questions, a question's rows from every seed together, so a seed that repeats a row "
        "adds no weight to the interval. "
        + (
            f"F1 and EM: {read_by} reading the same packers' contexts on "
            f"{read['qkey'].nunique()} questions of seed {int(read['seed'].iloc[0])} (n per row in `n read`)."
            + compressed_with(read)
            if read is not None
            else "F1 and EM: not run yet (`" + READER_BUDGETS.command + "`)."
        ),
    )
    others = settings.load(PACKING_DATASETS)
    studies = [PACKING, *(s for s in (PACKING_DATASETS,) if others is not None), READER_BUDGETS, LLMLINGUA]
    study_commands(section, settings, studies, "python -m harness.report replicate")
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
            record["n"] = row_count(source, PACKING_METRICS)
            summary = settings.means(source, PACKING_METRICS)
            for metric in PACKING_METRICS:
                mean, low, high = summary[metric]
                record[PACKING_HEADINGS[metric]] = (
                    f"{mean:.1f}" if metric == CONTEXT_TOKENS else fmt_ci(mean, low, high)
                )
            if read is not None:
                scores = settings.means(scored, READ_METRICS) if len(scored) else {}
                record["n read"] = len(scored)
                for metric in READ_METRICS:
                    record[READ_HEADINGS[metric]] = fmt_ci(*scores[metric]) if scores else "–"
            records.append(record)
    section.table(pd.DataFrame(records))

    contrasts = _packing_contrasts(rows, read, settings, main=True)
    if others is not None:
        for _, one_dataset in others.groupby(others["dataset"].astype(str), sort=True):
            contrasts += _packing_contrasts(one_dataset, None, settings, main=False)
    section.add(
        "Submodular − naive, paired on (question, seed) and pooled like the means above; intervals resample "
        "questions. n counts questions, SD is that of the per-question differences, and MDE is the smallest true "
        "difference a paired t-test over them detects at α = 0.05 with 80% power; an interval that includes zero "
        "refutes the paper only where the MDE is below the paper's effect"
        + ("" if others is not None else f" (other datasets: `{PACKING_DATASETS.command}`)")
        + ":"
    )
    section.table(pd.DataFrame([{k: v for k, v in r.items() if not k.startswith("_")} for r in contrasts]))
    main = [r for r in contrasts if r["_main"]]
    budgets = sorted({r["B"] for r in main})
    viewer_links(
        section,
        settings,
        PACKING,
        [(variant_label("packer=submod", b), variant_label("packer=packed", b), f"B = {b}") for b in budgets],
    )
    budget = 160 if 160 in budgets else budgets[len(budgets) // 2]
    aic = next(r["_result"] for r in main if r["B"] == budget and r["_metric"] == ANSWER_IN_CONTEXT)
    cov = next(r["_result"] for r in main if r["B"] == budget and r["_metric"] == GOLD_DOC_COVERAGE)
    aic_paper, cov_paper = _paper_gap(ANSWER_IN_CONTEXT), _paper_gap(GOLD_DOC_COVERAGE)
    section.add(
        f"**Verdict (B = {budget}): answer-in-context {_verdict(aic, paper=aic_paper)}** "
        f"(submod − naive {_diff(aic)}, paper {aic_paper:+.3f}; {_power(aic)}); **gold coverage "
        f"{_verdict(cov, paper=cov_paper)}** (submod − naive {_diff(cov)}, paper "
        f"{cov_paper:+.3f}; {_power(cov)}). Counting each question once instead of once per seed that drew "
        f"it, the answer-in-context difference is {aic['unique_diff']:+.3f}.",
    )
    for result, metric, paper in ((aic, "answer-in-context", aic_paper), (cov, "gold coverage", cov_paper)):
        section.claim(
            f"seed 000: submod > naive on {metric} (B = {budget})",
            _verdict(result, paper=paper),
            _evidence(result, paper),
        )
    for record in main:
        if record["B"] == budget and record["_metric"] == F1:
            result = record["_result"]
            section.add(
                "",
                f"**Verdict (B = {budget}), reader F1: {_verdict(result)}** (submod − naive {_diff(result)}; "
                f"{_power(result)}; {read_by}).",
            )
            section.claim(
                f"seed 000: submod > naive on F1 (B = {budget}, read by {read_by})",
                _verdict(result),
                _evidence(result),
            )
    for record in contrasts:
        if not record["_main"] and record["B"] == budget and record["_metric"] == ANSWER_IN_CONTEXT:
            result = record["_result"]
            section.claim(
                f"seed 000: submod > naive on answer-in-context (B = {budget}, {record['dataset']})",
                _verdict(result, paper=aic_paper),
                _evidence(result, aic_paper),
            )
    section.add("", *_packing_diagnosis(rows[rows["budget"] == budget], budget))
    figure = _packing_figure(rows, read, settings)
    section.add("", f"![answer-in-context and F1 by budget]({settings.relative(figure)})")
    return section


CONTRAST_METRICS = (ANSWER_IN_CONTEXT, GOLD_DOC_COVERAGE, ALL_GOLD_IN_READER)


def _packing_contrasts(rows: pd.DataFrame, read: pd.DataFrame | None, settings: Settings, main: bool) -> list[dict]:
    """Submod − naive per budget and metric (F1 from the reader runs when there are any), with each contrast's
    n, SD and MDE beside the paper's effect (Table 5 gives it for answer-in-context and gold coverage)."""
    records = []
    dataset = ", ".join(sorted(rows["dataset"].astype(str).unique()))
    for budget in sorted(rows["budget"].unique()):
        cells = [(metric, rows[rows["budget"] == budget]) for metric in CONTRAST_METRICS]
        if read is not None and {"submod", "packed"} <= set(read[read["budget"] == budget]["packer"]):
            cells += [(metric, read[read["budget"] == budget]) for metric in READ_METRICS]
        for metric, frame in cells:
            if not {"submod", "packed"} <= set(frame["packer"]):
                continue
            result = settings.contrast(frame, "packer", "submod", "packed", metric)
            paper = _paper_gap(metric)  # NaN where Table 5 gives none
            records.append(
                {
                    "dataset": dataset,
                    "B": int(budget),
                    "metric": READ_HEADINGS.get(metric) or PACKING_HEADINGS[metric],
                    "Δ [CI]": _diff(result),
                    "n": result["n_questions"],
                    "SD": f"{result['sd']:.3f}",
                    "MDE": f"{result['mde']:.3f}",
                    "paper Δ": f"{paper:+.3f}" if math.isfinite(paper) else "–",
                    "verdict": _verdict(result, paper=paper),
                    "_metric": metric,
                    "_result": result,
                    "_main": main,
                }
            )
    return records


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
                    points.append((budget, *settings.means(cell, [metric])[metric]))
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
