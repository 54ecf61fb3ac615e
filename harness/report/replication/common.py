"""What every section of the replication study shares: the studies and their commands, the papers' figures,
the settings, sections and verdicts, and the paired contrast."""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
from matplotlib.figure import Figure

from harness.metrics.registry import (
    ALL_GOLD_IN_READER,
    ANSWER_IN_CONTEXT,
    ANSWER_IN_CONTEXT_GRADED,
    CONTEXT_TOKENS,
    EM,
    F1,
    GOLD_DOC_COVERAGE,
)
from harness.report.formatting import fmt_ci, to_markdown
from harness.report.load import discover_runs, load_runs
from harness.report.numerics import READER, numerics_note, numerics_of, numerics_splits
from harness.stats.analyses import matched_pairs
from harness.stats.bootstrap import clustered_mean_ci
from harness.stats.power import paired_power

log = logging.getLogger("harness.report.replication")

DEFAULT_STUDIES = Path("outputs/studies")
# Beside the studies, never the published docs/replication.md: that page is rewritten only when named by
# --out together with --force (harness.report.tracked), as `make studies` does.
DEFAULT_OUT = DEFAULT_STUDIES / "replication.md"
PUBLISHED = Path("docs/replication.md")


@dataclass(frozen=True)
class Study:
    """One study directory under the studies root and the command that fills it."""

    directory: str
    command: str

    def path(self, root: Path) -> Path:
        return root / self.directory

    def command_in(self, root: Path) -> str:
        """The study's command writing into ``root`` (the study root a page was made from)."""
        default = f"hydra.sweep.dir={self.path(DEFAULT_STUDIES).as_posix()}"
        return self.command.replace(default, f"hydra.sweep.dir={self.path(root).as_posix()}")


def _sweep(directory: str, sweep: str | None = None, *overrides: str) -> Study:
    """A study made by ``sweeps/<sweep>.yaml`` (by default the directory's name) with ``overrides``, into
    ``outputs/studies/<directory>``."""
    command = ["python -m harness -m", f"+sweeps={sweep or directory}", *overrides]
    return Study(directory, " ".join([*command, f"hydra.sweep.dir=outputs/studies/{directory}"]))


PACKING = _sweep("replication_packing")
# The packing contrasts on the other multi-hop samples (MuSiQue, 2WikiMultiHopQA), selection only.
PACKING_DATASETS = _sweep("replication_packing_datasets")
READER_BUDGETS = _sweep("replication_reader_budgets")
# The reader columns at paper-like n: the strongest offline rung on all 485 HotpotQA questions of the studies.
READER_IRCOT = _sweep("replication_reader_ircot")
# LLMLingua spends seconds compressing each question (a language model over the whole pool), so it has its own
# directory: a sweep of the other packers never waits on it. Every budget of the packing table: where llmlingua
# 0.2.2 fails at a target the packer asks at a larger one and trims (sweeps/replication_reader_budgets.yaml).
LLMLINGUA = _sweep("replication_llmlingua", "replication_reader_budgets", "packer=llmlingua", "budget=96,128,160,224")
ABLATION = _sweep("packing_ablation")
LADDER = _sweep("replication_ladder")
INJECTION_OPEN = _sweep("replication_injection_open")
INJECTION_DISTRACTOR = _sweep(
    "injection_distractor",
    "injection_selection",
    "dataset=hotpotqa_fork_dev_subsampled",
    "dataset.question_ids_file=harness/data/question_ids/hotpotqa_fork_dev_subsampled_485.txt",
    "dataset.sample_size=null",
    "retriever.setting=distractor",
    "retriever.pool_size=null",
)
TREES = _sweep("replication_trees")
# Every study in the order `make studies` runs them: selection-only studies first (minutes), then the trees
# (LM summaries) and the reader studies (hours on a CPU).
STUDIES = (
    PACKING,
    PACKING_DATASETS,
    ABLATION,
    INJECTION_OPEN,
    INJECTION_DISTRACTOR,
    TREES,
    READER_IRCOT,
    READER_BUDGETS,
    LLMLINGUA,
    LADDER,
)

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
    # Readers whose rows came with several numerics, told apart (harness.report.numerics): said at the top.
    notes: list[str] = field(default_factory=list)

    @property
    def figures(self) -> Path:
        return self.out.parent / self.out.stem

    def relative(self, path: Path) -> str:
        return str(path.relative_to(self.out.parent))

    def load(self, *studies: Study) -> pd.DataFrame | None:
        """The rows of those of the studies that have been run (None when none has)."""
        paths = []
        for study in studies:
            path = study.path(self.studies)
            if not path.is_dir():
                continue
            try:  # a study begun but without a finished job yet counts as not run, and hides no other study
                discover_runs([path])
            except FileNotFoundError as error:
                log.warning("%s: %s", path, error)
                continue
            paths.append(path)
        if not paths:
            return None
        try:
            rows, _ = load_runs(paths)
        except ValueError as error:  # every run there holds no rows
            log.warning("%s: %s", ", ".join(map(str, paths)), error)
            return None
        note = numerics_note(numerics_splits(rows))
        if note and note not in self.notes:
            self.notes.append(note)
        return rows

    def means(self, rows: pd.DataFrame, metrics: Sequence[str]) -> dict[str, tuple[float, float, float]]:
        """Each metric's mean with the interval of a bootstrap that resamples whole questions."""
        return clustered_mean_ci(rows, list(metrics), "qkey", self.n_resamples, self.confidence, self.seed)

    def contrast(self, rows: pd.DataFrame, column: str, a, b, metric: str) -> dict:
        """Policy a minus policy b on ``metric``, paired on (question, seed), pooled like the tables' means
        (a question drawn by two seeds counts twice) with a bootstrap that resamples whole questions.
        ``unique_diff`` is the same difference with each question counted once. Rows of different readers
        (a reader's numerics told apart count as different readers) are never paired."""
        within = [g for _, g in rows.groupby(READER, sort=False, dropna=False)] if READER in rows else [rows]
        if column == READER or not within:
            within = [rows]
        pairs = pd.concat(
            [matched_pairs(g[g[column] == a], g[g[column] == b], metric, question="qkey") for g in within],
            ignore_index=True,
        )
        pairs = pairs.dropna(subset=["a", "b"]).assign(d=lambda f: f["a"] - f["b"])
        mean, low, high = clustered_mean_ci(pairs, ["d"], "question", self.n_resamples, self.confidence, self.seed)["d"]
        unique = pairs.groupby("question")["d"].mean().mean() if len(pairs) else math.nan
        power = paired_power(pairs)
        return {
            "mean_diff": mean,
            "ci_low": low,
            "ci_high": high,
            "n": len(pairs),
            "unique_diff": float(unique),
            "won": int((pairs["d"] > 0).sum()),
            "lost": int((pairs["d"] < 0).sum()),
            "n_questions": power.n,
            "sd": power.sd,
            "mde": power.mde,
        }


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

    def missing(self, *studies: Study) -> Section:
        """This section as it reads before its runs exist: the commands that make them."""
        self.add("**Not run yet.** The runs this section needs are made by:")
        self.command(*(s.command for s in studies))
        return self


# ----------------------------------------------------------------------------------------------------------
# helpers


def verdict(
    low: float, high: float, direction: int = 1, mde: float = math.nan, paper: float = math.nan, percent: bool = False
) -> str:
    """The claim's fate from an interval of (ours - theirs-baseline) in the paper's direction (+1 or -1).

    An interval that includes zero refutes the claim only if the design could have seen the paper's effect:
    with the minimum detectable effect ``mde`` (harness.stats.power) at or above the paper's ``paper``
    effect it reads *underpowered* instead of *not reproduced*. ``percent``: the effects are relative
    changes, shown as percentages."""
    if not (math.isfinite(low) and math.isfinite(high)):
        return "not testable (no interval)"

    def show(value: float, signed: bool = False) -> str:
        if percent:
            return (f"{value:+.0%}" if signed else f"{value:.0%}").replace("-", "−")
        return f"{value:+.3f}" if signed else f"{value:.3f}"

    low, high = (low, high) if direction > 0 else (-high, -low)
    if low > 0:
        return "reproduced"
    if high < 0:
        return "reversed"
    if math.isfinite(mde) and math.isfinite(paper):
        if mde >= abs(paper):
            return f"underpowered (MDE {show(mde)} vs paper {show(paper, signed=True)})"
        return f"not reproduced (the interval includes zero; MDE {show(mde)} below the paper's {show(abs(paper))})"
    if math.isfinite(mde):
        return f"not reproduced (the interval includes zero; MDE {show(mde)})"
    return "not reproduced (the interval includes zero)"


def counted(n: int, noun: str) -> str:
    """``"1 seed"``, ``"3 seeds"``."""
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _diff(result: dict) -> str:
    return fmt_ci(result["mean_diff"], result["ci_low"], result["ci_high"])


def _power(result: dict) -> str:
    """``n``, the paired SD and the minimum detectable effect of a contrast (α = 0.05, 80% power)."""
    return f"n = {result['n_questions']}, SD {result['sd']:.3f}, MDE {result['mde']:.3f}"


def _evidence(result: dict, paper: float = math.nan) -> str:
    """A contrast's interval, the paper's effect when there is one, and its power: the verdict table's evidence."""
    against = f" vs paper {paper:+.3f}" if math.isfinite(paper) else ""
    return f"{_diff(result)}{against}; {_power(result)}"


def _verdict(result: dict, direction: int = 1, paper: float = math.nan) -> str:
    if result["n_questions"] < 2:  # one pair resamples to itself: an interval of zero width says nothing
        return f"too few runs (n = {result['n_questions']} question{'' if result['n_questions'] == 1 else 's'})"
    return verdict(result["ci_low"], result["ci_high"], direction, mde=result["mde"], paper=paper)


_VIEWERS_WRITTEN: set[Path] = set()


def viewer_links(
    section: Section, settings: Settings, study: Study, contrasts: Sequence[tuple[str, str, str]] = ()
) -> None:
    """Write the study's evidence viewer (``<study dir>/viewer.html``, once per process) and add a line linking
    the section to it and each contrast (``(label a, label b, text)``, labels as the viewer names its policies:
    ``harness.report.viewer.data.variant_label``) to its two policies side by side.

    A link goes only to a viewer that travels with the document: one in the document's own folder tree (the
    default document beside the studies). The published page (docs/) never links into the git-ignored studies,
    which a fresh clone lacks and the site does not carry: it says where the viewer is written instead."""
    from harness.report.load import annotate
    from harness.report.viewer import VIEWER_FILE, compare_hash, write_viewer

    folder = study.path(settings.studies)
    path = folder / VIEWER_FILE
    if path not in _VIEWERS_WRITTEN:
        try:
            rows, layout = annotate(load_runs([folder])[0])
            write_viewer(rows, layout, [str(folder)], path, title=f"Evidence viewer: {study.directory}")
        except (FileNotFoundError, ValueError) as error:
            log.warning("no viewer for %s: %s", folder, error)
            return
        _VIEWERS_WRITTEN.add(path)
    shown = (study.path(settings.studies) / VIEWER_FILE).as_posix()
    if not (path.is_file() and path.resolve().is_relative_to(settings.out.parent.resolve())):
        section.add(
            "",
            f"Per question, what each policy put in front of the reader: the study's evidence viewer, `{shown}`, "
            "which `python -m harness.report replicate` writes beside the study's runs (a file of the runs, not "
            "of this page: run the study's command above, then open it; its menu of one-key comparisons pairs "
            "the policies the contrasts compare).",
        )
        return
    href = Path(os.path.relpath(path.resolve(), settings.out.parent.resolve())).as_posix()
    links = [f"[{text}]({href}#{compare_hash(a, b)})" for a, b, text in contrasts]
    section.add(
        "",
        f"Per question, what each policy put in front of the reader: [{study.directory} viewer]({href}) "
        f"(`python -m harness.report view {study.path(settings.studies).as_posix()}`)"
        + (f"; side by side: {', '.join(links)}." if links else "."),
    )


def _paper_gap(metric: str) -> float:
    """Submod − naive in the paper's Table 5 (B = 160); NaN for a metric the table does not give."""
    if metric not in SEED000_TABLE5["submod"]:
        return math.nan
    return SEED000_TABLE5["submod"][metric] - SEED000_TABLE5["packed"][metric]


def _mean_diff(results: dict[str, dict], name: str) -> float:
    return results[name]["mean_diff"] if name in results else math.nan


def read_with(rows: pd.DataFrame) -> str:
    """How the rows' answers were computed, each reader with its numerics: ``"qwen2.5-coder-0.5b
    (transformers/hf/bfloat16/cpu-amx)"``; readers joined by commas."""
    pairs = pd.DataFrame({"reader": rows[READER].astype(str), "numerics": numerics_of(rows)}).drop_duplicates()
    return ", ".join(f"{r.reader} ({r.numerics})" for r in pairs.sort_values(["reader", "numerics"]).itertuples())


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
# The reader-scored columns beside the selection columns.
READ_METRICS = (F1, EM)
READ_HEADINGS = {F1: "F1", EM: "EM"}
