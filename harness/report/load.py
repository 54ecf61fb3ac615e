"""Finding and loading the result rows of one run, a sweep, or several of either, and naming the policies in them.

A run directory holds ``rows.parquet`` (one row per question) and ``summary.json``. A sweep directory
(Hydra multirun) holds numbered job directories, each a run directory; a failed job leaves ``error.txt``
instead and is skipped with a warning.

A *policy* is what differs between runs: the non-constant ones among the component columns (tree,
diversifier, packer, retriever, perturb, reader, k) plus the ``cfg.*`` hyper-parameter columns that vary
independently of those components (``cfg.diversifier.lambda_``, ``cfg.perturb.rho``, ...). ``dataset``
and ``budget`` are *settings*: tables are given per setting and contrasts are taken within one.
"""

from __future__ import annotations

import fnmatch
import json
import logging
import math
import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from harness.core.stage import STAGES
from harness.report.numerics import numerics_note, split_reader_numerics
from harness.stats.protocol import format_parameter

log = logging.getLogger(__name__)

ROWS_FILE = "rows.parquet"
SUMMARY_FILE = "summary.json"
ERROR_FILE = "error.txt"
REPORT_DIR = "report"
# Deep enough for outputs/multirun/<date>/<time>/<job>, shallow enough never to crawl a cache tree.
MAX_SCAN_DEPTH = 6

COMPONENT_COLUMNS = ("tree", "diversifier", "packer", "retriever", "perturb", "reader", "k")
SETTING_COLUMNS = ("dataset", "budget")
# Columns that describe the conditions a context policy is evaluated under rather than the policy itself:
# an oracle picks among context policies for a fixed reader and perturbation, never across them.
CONDITION_COLUMNS = ("reader", "perturb")
STAGE_PREFIXES = tuple(f"{stage}." for stage in STAGES)
CONDITION_CFG_PREFIXES = ("cfg.reader.", "cfg.perturb.", "cfg.prompt.", "cfg.dataset.")
# Config keys that change how a run executes, never what it computes; they may differ between machines.
RUNTIME_KEY_PATTERNS = (
    "cfg.paths.*",
    "cfg.cache.*",
    "cfg.logger.*",
    "cfg.read_chunk",
    "cfg.hydra.*",
    "*._target_",
    "*cache_dir",
    "*models_dir",
    "*.batch_size",
    "*.trainer.*",
    "*.device_map",
)
# Columns that repeat a component or setting column under their config name.
_MIRRORED_CFG = {"cfg.seed", "cfg.budget", "cfg.k"}


@dataclass(frozen=True)
class RunInfo:
    """One loaded run directory: where it is, how many rows it gave, and its summary.json (None if absent)."""

    path: Path
    n_rows: int
    summary: dict | None


def display_path(path: str | Path, start: str | Path | None = None) -> str:
    """``path`` as the command that wrote a page would name it: relative to ``start`` (the working directory),
    so a page shared with others shows no path of this machine; ``/`` separated on every system."""
    try:
        relative = os.path.relpath(Path(path).absolute(), Path(start or os.getcwd()).absolute())
    except ValueError:  # another drive (Windows): no relative path exists, the folder's name says enough
        return Path(path).name
    return Path(relative).as_posix()


def _natural_key(path: Path) -> tuple:
    return tuple(int(part) if part.isdigit() else part for part in re.split(r"(\d+)", path.name))


def _scan(directory: Path, depth: int) -> list[Path]:
    if (directory / ROWS_FILE).is_file():
        return [directory]
    if (directory / ERROR_FILE).is_file():
        log.warning("skipping failed job %s (it left %s instead of %s)", directory, ERROR_FILE, ROWS_FILE)
        return []
    if depth >= MAX_SCAN_DEPTH:
        return []
    found: list[Path] = []
    children = [c for c in directory.iterdir() if c.is_dir() and not c.name.startswith(".") and c.name != REPORT_DIR]
    for child in sorted(children, key=_natural_key):
        found.extend(_scan(child, depth + 1))
    if not found and directory.name.isdigit() and depth > 0:
        log.warning("skipping job %s: neither %s nor %s (unfinished?)", directory, ROWS_FILE, ERROR_FILE)
    return found


def discover_runs(paths: Iterable[str | Path]) -> list[Path]:
    """Run directories under the given run/sweep directories, each once, in the order given (sweep jobs by number)."""
    found: list[Path] = []
    seen: set[Path] = set()
    for raw in paths:
        path = Path(raw)
        if not path.is_dir():
            raise FileNotFoundError(f"not a directory: {str(raw)!r} (expected a run or sweep directory)")
        runs = _scan(path, 0)
        if not runs:
            raise FileNotFoundError(f"no {ROWS_FILE} under {str(raw)!r} (is it a run or sweep directory?)")
        for run in runs:
            resolved = run.resolve()
            if resolved not in seen:
                seen.add(resolved)
                found.append(run)
    return found


def _read_summary(run: Path) -> dict | None:
    path = run / SUMMARY_FILE
    if not path.is_file():
        log.warning("%s has %s but no %s; using its rows anyway", run, ROWS_FILE, SUMMARY_FILE)
        return None
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as error:
        log.warning("ignoring unreadable %s: %s", path, error)
        return None


def load_runs(paths: Iterable[str | Path]) -> tuple[pd.DataFrame, list[RunInfo]]:
    """All rows of the given directories in one frame (with a ``run_dir`` column), and what was loaded."""
    frames, infos = [], []
    for run in discover_runs(paths):
        frame = pd.read_parquet(run / ROWS_FILE)
        infos.append(RunInfo(run, len(frame), _read_summary(run)))
        if frame.empty:
            log.warning("%s holds no rows; skipped", run / ROWS_FILE)
            continue
        frames.append(frame.assign(run_dir=str(run)))
    if not frames:
        raise ValueError("the given directories hold no result rows")
    rows = pd.concat(frames, ignore_index=True, sort=False)
    if "question_id" not in rows.columns:
        raise ValueError("result rows have no 'question_id' column; are these harness rows.parquet files?")
    return normalise_rows(rows), infos


def _is_missing(value) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def _normalise_column(series: pd.Series) -> pd.Series:
    """None -> NaN, booleans -> 0/1, and numbers stored as objects (mixed across runs) -> numeric."""
    if pd.api.types.is_bool_dtype(series):
        return series.astype(float)
    if pd.api.types.is_numeric_dtype(series):
        return series
    present = series[series.notna()]
    try:
        kinds = {type(v) for v in pd.unique(present)}
    except TypeError:  # unhashable values (lists): leave as they are
        return series
    if kinds and all(issubclass(k, (bool, np.bool_, int, float, np.number)) for k in kinds):
        return pd.Series(np.where(series.notna(), series, np.nan).astype(float), index=series.index)
    return series.astype(object).where(series.notna(), np.nan)


def normalise_rows(rows: pd.DataFrame) -> pd.DataFrame:
    """Uniform types across runs, ``qkey``: the question identity (dataset-qualified when datasets vary), and
    one ``reader`` per reader numerics where a reader's rows were computed several ways
    (``harness.report.numerics``)."""
    columns = {}
    for column in rows.columns:
        free_text = column in ("question", "context", "answer", "gold_answers")
        # Stage reports (tree.*, diversify.*, pack.*) hold booleans that other runs leave empty.
        if not free_text and (column.startswith(("cfg.", *STAGE_PREFIXES)) or rows[column].dtype == object):
            columns[column] = _normalise_column(rows[column])
        else:
            columns[column] = rows[column]
    # One frame built at once: replacing hundreds of columns one by one fragments it (pandas warns).
    rows = pd.DataFrame(columns, index=rows.index)
    qid = rows["question_id"].astype(str)
    if "dataset" in rows.columns and rows["dataset"].nunique(dropna=False) > 1:
        rows["qkey"] = rows["dataset"].astype(str) + "::" + qid
    else:
        rows["qkey"] = qid
    rows, splits = split_reader_numerics(rows)
    if splits:
        log.warning("%s", numerics_note(splits))
    return rows


def varies(series: pd.Series) -> bool:
    return series.nunique(dropna=False) > 1


def format_value(value) -> str:
    """A compact, unambiguous rendering of one config value (1.0 -> '1', 0.1 -> '0.1', missing -> '-')."""
    return format_parameter(value)


def _is_runtime_key(column: str) -> bool:
    return any(fnmatch.fnmatchcase(column, pattern) for pattern in RUNTIME_KEY_PATTERNS)


def hyperparameter_columns(rows: pd.DataFrame, components: Sequence[str]) -> list[str]:
    """``cfg.*`` columns whose value varies among rows that share every component and setting value.

    A column fixed by the components (``cfg.diversifier.name``, ``cfg.reader.pretrained``) repeats what the
    component already says; one that varies within a component (``cfg.diversifier.lambda_`` within mmr)
    is a hyper-parameter of it.
    """
    keys = [c for c in (*components, *SETTING_COLUMNS) if c in rows.columns]
    candidates = [
        c
        for c in rows.columns
        if c.startswith("cfg.") and c not in _MIRRORED_CFG and not _is_runtime_key(c) and varies(rows[c])
    ]
    if not candidates:
        return []
    # Distinct combinations only: a sweep has as many as it has jobs, however many rows each holds.
    seed = ["seed"] if "seed" in rows.columns else []
    combos = rows[[*keys, *seed, *candidates]].drop_duplicates().astype(object).map(format_value)
    found = []
    for column in candidates:
        if seed and combos.groupby("seed")[column].nunique().max() <= 1:
            continue  # follows the seed alone (cfg.dataset.seed = ${seed}): replication, not a policy
        if not keys or combos.groupby(keys)[column].nunique().max() > 1:
            found.append(column)
    return sorted(found)


@dataclass(frozen=True)
class Layout:
    """Which columns identify settings, policies and conditions in one set of rows."""

    settings: tuple[str, ...]
    policy: tuple[str, ...]
    conditions: tuple[str, ...] = field(default=())

    @property
    def context(self) -> tuple[str, ...]:
        """The policy columns a context policy chooses (everything but the evaluation conditions)."""
        return tuple(c for c in self.policy if c not in self.conditions)


def _is_condition(column: str) -> bool:
    return column in CONDITION_COLUMNS or column.startswith(CONDITION_CFG_PREFIXES)


def short_name(column: str) -> str:
    return column.removeprefix("cfg.")


def policy_label(values: dict, columns: Sequence[str]) -> str:
    """``packer=submod, diversifier=mmr, diversifier.lambda_=0.3``; a hyper-parameter the policy does not
    have (lambda_ of knn) is left out, which keeps labels distinct and short."""
    return ", ".join(
        f"{short_name(c)}={format_value(values[c])}"
        for c in columns
        if not (c.startswith("cfg.") and _is_missing(values[c]))
    )


def _grouped_policy_columns(components: Sequence[str], hyperparameters: Sequence[str]) -> tuple[str, ...]:
    """Each component followed by its own hyper-parameters (cfg.<component>.*), then any others."""
    ordered: list[str] = []
    for component in COMPONENT_COLUMNS:
        if component in components:
            ordered.append(component)
        ordered.extend(h for h in hyperparameters if h.startswith(f"cfg.{component}.") and h not in ordered)
    return tuple(ordered + [h for h in hyperparameters if h not in ordered])


def _sort_key(value) -> tuple:
    if _is_missing(value):
        return (0, 0.0, "")
    if isinstance(value, (int, float, np.number)):
        return (1, float(value), "")
    return (2, 0.0, str(value))


def annotate(rows: pd.DataFrame) -> tuple[pd.DataFrame, Layout]:
    """Rows with a ``policy`` label column, ordered policy by policy, and the layout that names the columns.

    With no varying policy column the label names the constant components (tree, diversifier, packer).
    Rows repeated for the same (setting, policy, question, seed) -- the same run loaded twice under
    different directories -- are dropped with a warning, keeping the first. A reader whose rows hold several
    numerics is first told apart per numerics (``normalise_rows`` has done so for loaded rows).
    """
    rows, splits = split_reader_numerics(rows)
    if splits:
        log.warning("%s", numerics_note(splits))
    components = [c for c in COMPONENT_COLUMNS if c in rows.columns and varies(rows[c])]
    policy = _grouped_policy_columns(
        components, hyperparameter_columns(rows, [c for c in COMPONENT_COLUMNS if c in rows.columns])
    )
    settings = tuple(c for c in SETTING_COLUMNS if c in rows.columns and (c == "budget" or varies(rows[c])))
    layout = Layout(settings=settings, policy=policy, conditions=tuple(c for c in policy if _is_condition(c)))

    label_columns = list(policy) or [c for c in ("tree", "diversifier", "packer") if c in rows.columns]
    rows = rows.copy()
    if label_columns:
        # Label each distinct combination once, then give every row its combination's label.
        codes = rows.groupby(label_columns, sort=False, dropna=False).ngroup().to_numpy()
        firsts = rows.iloc[pd.Series(np.arange(len(rows))).groupby(codes).first().to_numpy()]
        combos = [
            dict(zip(label_columns, values, strict=False)) for values in firsts[label_columns].itertuples(index=False)
        ]
        labels = [policy_label(combo, label_columns) for combo in combos]
        order = [
            labels[i]
            for i in sorted(range(len(combos)), key=lambda i: tuple(_sort_key(combos[i][c]) for c in label_columns))
        ]
        rows["policy"] = pd.Categorical(
            np.asarray(labels, dtype=object)[codes], categories=list(dict.fromkeys(order)), ordered=True
        )
    else:
        rows["policy"] = pd.Categorical(["all rows"] * len(rows), categories=["all rows"], ordered=True)

    identity = [*settings, "policy", "qkey"] + (["seed"] if "seed" in rows.columns else [])
    repeated = rows.duplicated(subset=identity, keep="first")
    if repeated.any():
        log.warning(
            "%d rows repeat a (setting, policy, question, seed) already loaded from another directory; "
            "keeping the first",
            int(repeated.sum()),
        )
        rows = rows.loc[~repeated].reset_index(drop=True)
    return rows, layout


def policy_components(rows: pd.DataFrame, layout: Layout) -> pd.DataFrame:
    """One row per policy label with its component values, in policy order."""
    columns = list(layout.policy)
    frame = (
        rows.groupby("policy", observed=True)[columns].first()
        if columns
        else pd.DataFrame(index=pd.Index(rows["policy"].cat.categories, name="policy"))
    )
    return frame
