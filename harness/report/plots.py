"""Report plots (PNG). Figures are built with matplotlib's object API on the Agg canvas, so no display and
no pyplot global state is involved. Each function returns the paths it wrote (none when the data lack the
variation the plot needs)."""

from __future__ import annotations

import math
import re
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from harness.metrics.registry import ANSWER_IN_CONTEXT, F1, heading
from harness.report.common import StudyResult
from harness.report.load import Layout, format_value, short_name
from harness.stats.protocol import format_parameter

DPI = 150
_SIZE_PATTERN = re.compile(r"(\d+(?:\.\d+)?)\s*([bBmM])(?=$|[^a-zA-Z0-9])")


def _error_bars(frame: pd.DataFrame, prefix: str) -> np.ndarray:
    """2 x n distances from the mean to the interval ends; 0 where the interval is missing."""
    mean = frame[prefix].to_numpy(float)
    low = np.nan_to_num(mean - frame[f"{prefix}_ci_low"].to_numpy(float), nan=0.0)
    high = np.nan_to_num(frame[f"{prefix}_ci_high"].to_numpy(float) - mean, nan=0.0)
    return np.vstack([np.maximum(low, 0.0), np.maximum(high, 0.0)])


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9.]+", "_", text).strip("_") or "all"


def _save(fig: Figure, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=DPI)
    return path


def plot_budget_curves(policy_data: pd.DataFrame | None, layout: Layout, out_dir: Path) -> list[Path]:
    """F1 and answer-in-context against the budget, one line per policy, with interval bars."""
    if policy_data is None or "budget" not in policy_data.columns or policy_data["budget"].nunique() < 2:
        return []
    metrics = [m for m in (F1, ANSWER_IN_CONTEXT) if m in policy_data.columns]
    if not metrics:
        return []
    split = [c for c in layout.settings if c != "budget"]
    groups = policy_data.groupby(split, sort=True) if split else [((), policy_data)]
    written = []
    for keys, frame in groups:
        keys = keys if isinstance(keys, tuple) else (keys,)
        suffix = " ".join(f"{short_name(k)}={format_value(v)}" for k, v in zip(split, keys, strict=False))
        fig = Figure(figsize=(6.0 * len(metrics), 4.6))
        axes = [fig.add_subplot(1, len(metrics), i + 1) for i in range(len(metrics))]
        policies = list(dict.fromkeys(frame["policy"]))
        # a small horizontal dodge keeps the interval bars of policies at the same budget apart
        span = float(frame["budget"].max() - frame["budget"].min())
        dodge = {p: (i - (len(policies) - 1) / 2) * 0.012 * span for i, p in enumerate(policies)}
        for axis, metric in zip(axes, metrics, strict=False):
            for policy, lines in frame.groupby("policy", sort=False):
                lines = lines.sort_values("budget")
                axis.errorbar(
                    lines["budget"] + dodge[policy],
                    lines[metric],
                    yerr=_error_bars(lines, metric),
                    marker="o",
                    capsize=3,
                    label=str(policy),
                )
            axis.set_xticks(sorted(frame["budget"].unique()))
            axis.set_xlabel("budget (reader tokens)")
            axis.set_ylabel(f"mean {heading(metric)}")
            axis.set_title(f"{heading(metric)} vs budget" + (f" ({suffix})" if suffix else ""))
            axis.grid(alpha=0.3)
        axes[0].legend(fontsize="small", title="policy", title_fontsize="small")
        name = "budget_curves" + (f"_{_slug(suffix)}" if suffix else "") + ".png"
        written.append(_save(fig, out_dir / name))
    return written


def reader_scale(name: str) -> float:
    """Parameter count read from a reader name ('qwen2.5-7b' -> 7e9, 'smollm2-135m' -> 1.35e8); inf if none.
    The numerics of a reader told apart by them ('qwen2.5-7b [llama_cpp/gguf-Q4_K_M/gguf/cpu]') are not read."""
    found = _SIZE_PATTERN.findall(str(name).split(" [", 1)[0])
    if not found:
        return math.inf
    number, unit = found[-1]
    return float(number) * (1e9 if unit.lower() == "b" else 1e6)


def plot_reader_ladder(contrast_data: pd.DataFrame | None, layout: Layout, metric: str, out_dir: Path) -> list[Path]:
    """Each contrast (policy minus baseline) per reader, readers ordered by size, with interval bars."""
    if contrast_data is None or "policy.reader" not in contrast_data.columns:
        return []
    if contrast_data["policy.reader"].nunique() < 2:
        return []
    others = [c for c in layout.policy if c != "reader"]

    def series_label(row: pd.Series) -> str:
        parts = [f"{short_name(c)}={format_value(row[f'policy.{c}'])}" for c in others]
        parts += [f"{short_name(k)}={format_value(row[k])}" for k in layout.settings]
        return ", ".join(parts) or "contrast"

    data = contrast_data.assign(series=contrast_data.apply(series_label, axis=1))
    readers = sorted(data["policy.reader"].astype(str).unique(), key=lambda r: (reader_scale(r), r))
    position = {reader: i for i, reader in enumerate(readers)}
    series = list(dict.fromkeys(data["series"]))
    width = 0.3 / max(len(series), 1)
    fig = Figure(figsize=(max(6.0, 1.6 * len(readers) + 3), 4.8))
    axis = fig.add_subplot(1, 1, 1)
    for i, name in enumerate(series):
        rows = data[data["series"] == name].copy()
        rows["x"] = rows["policy.reader"].astype(str).map(position) + (i - (len(series) - 1) / 2) * width
        rows = rows.sort_values("x")
        axis.errorbar(
            rows["x"],
            rows["mean_diff"],
            yerr=_error_bars(
                rows.rename(columns={"mean_diff": "d", "ci_low": "d_ci_low", "ci_high": "d_ci_high"}), "d"
            ),
            marker="o",
            capsize=3,
            label=name,
        )
    axis.axhline(0.0, color="grey", linewidth=1, linestyle="--")
    axis.set_xticks(range(len(readers)), readers, rotation=20)
    axis.set_xlabel("reader (ordered by size)")
    axis.set_ylabel(f"Δ mean {heading(metric)} vs baseline")
    baselines = ", ".join(sorted({str(b) for b in data.get("baseline_name", data["baseline"])}))
    axis.set_title(f"Reader-scale ladder: policy − baseline ({baselines})", fontsize="medium")
    axis.grid(alpha=0.3)
    axis.legend(fontsize="small", title="policy", title_fontsize="small")
    return [_save(fig, out_dir / "reader_ladder.png")]


def plot_diversity(result: StudyResult, out_dir: Path, index: int = 0) -> list[Path]:
    """Test S-Recall of each tuned method against the measured pool redundancy of each perturbation level,
    with the rule's trigger rate on a second axis."""
    study = result.study
    means = study.means
    levels = sorted(means["level"].unique())
    if len(levels) < 2:
        return []
    use_redundancy = study.redundancy is not None and study.redundancy.reindex(levels).notna().all()
    x_of = (study.redundancy.reindex(levels) if use_redundancy else pd.Series(levels, index=levels)).to_dict()
    fig = Figure(figsize=(7.5, 5.8))
    axis = fig.add_subplot(1, 1, 1)
    chosen = study.chosen
    for method, rows in means.groupby("method", sort=True):
        rows = rows.sort_values("level")
        point = chosen.get(method, "default")
        label = method if point == "default" else f"{method} ({point})"
        axis.errorbar(
            rows["level"].map(x_of),
            rows["mean"],
            yerr=_error_bars(rows.rename(columns={"mean": "m", "ci_low": "m_ci_low", "ci_high": "m_ci_high"}), "m"),
            marker="o",
            capsize=3,
            label=label,
            linewidth=2.2 if method == study.reference else 1.4,
        )
    axis.set_xlabel(
        "measured pool redundancy (near-duplicate pair share)"
        if use_redundancy
        else f"perturbation level ({result.level_name})"
    )
    axis.set_ylabel("test S-Recall@k")
    if use_redundancy:  # name the perturbation level of each redundancy value along the top edge
        top = axis.secondary_xaxis("top")
        top.set_xticks(
            [x_of[lv] for lv in levels],
            [f"{result.level_name}={format_parameter(lv)}" for lv in levels],
            fontsize="small",
        )
    handles, labels = axis.get_legend_handles_labels()
    if not study.trigger_rate.empty:
        twin = axis.twinx()
        for method, rates in study.trigger_rate.iterrows():
            rates = rates.reindex(levels).dropna()
            line = twin.plot(
                [x_of[lv] for lv in rates.index],
                rates.to_numpy(),
                linestyle="--",
                marker="s",
                color="tab:grey",
                label=f"{method} trigger rate",
            )
            handles += line
            labels.append(f"{method} trigger rate (right axis)")
        twin.set_ylabel("rule trigger rate")
        twin.set_ylim(-0.02, 1.02)
    # below the axes: the trigger-rate line spans the whole height, so no corner inside is free
    axis.legend(handles, labels, fontsize="small", loc="upper center", bbox_to_anchor=(0.5, -0.13), ncol=2)
    axis.set_title(
        "S-Recall vs measured redundancy" + (f" ({result.label})" if result.label else ""), fontsize="medium"
    )
    axis.grid(alpha=0.3)
    name = f"diversity_{_slug(result.label) if result.label else 'study'}" + (f"_{index}" if index else "") + ".png"
    return [_save(fig, out_dir / name)]
