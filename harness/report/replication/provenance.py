"""Where a section's rows came from: the overrides their runs carry, said as the command that makes them.

Every Hydra job records its task overrides in ``<job>/.hydra/overrides.yaml``. The runs of a study are read
back as one multirun command (a key every run sets alike as ``key=value``, a swept key as ``key=v1,v2``) and
compared with what the study's own command runs: the overrides on its command line and the grid of its sweep
file (``sweeps/<name>.yaml``: ``hydra.sweeper.params``). When they agree the page shows the study's command;
when they do not (a 40-question slice, a budget left out, an extra override) it shows the rows' own command
and says how they differ from the study's, so a figure is never labelled with a command that did not make it.
Below the commands: the data files the runs read, by name and sha256, and the machines they ran on, from the
runs' summary.json (``harness.report.run_sources``).
"""

from __future__ import annotations

import json
import math
import shlex
from collections.abc import Sequence
from pathlib import Path

import yaml

from harness.report.replication.common import Section, Settings, Study
from harness.report.run_sources import source_lines

SWEEPS_DIR = Path(__file__).resolve().parents[3] / "sweeps"
LAUNCH = "python -m harness -m"

Grid = dict[str, list[str]]


def _job_order(path: Path) -> tuple:
    """Job folders in launch order (``2`` before ``10``), whatever their depth."""
    return tuple((0, int(part), "") if part.isdigit() else (1, 0, part) for part in path.parts)


def run_overrides(folder: Path) -> list[list[str]]:
    """The task overrides of each finished run under ``folder`` (a run: ``rows.parquet`` with
    ``.hydra/overrides.yaml`` beside it), in launch order."""
    runs = []
    for rows in sorted(folder.rglob("rows.parquet"), key=lambda p: _job_order(p.parent)):
        path = rows.parent / ".hydra" / "overrides.yaml"
        if path.is_file():
            runs.append([str(o) for o in yaml.safe_load(path.read_text()) or []])
    return runs


def _add(grid: Grid, key: str, values: Sequence[str]) -> None:
    known = grid.setdefault(key, [])
    known.extend(v for v in values if v not in known)


def runs_grid(runs: Sequence[Sequence[str]]) -> Grid:
    """Each override key the runs set, with its values in the order the runs met them."""
    grid: Grid = {}
    for overrides in runs:
        for override in overrides:
            key, _, value = override.partition("=")
            _add(grid, key, [value])
    return grid


def _sweep_params(name: str) -> Grid:
    path = SWEEPS_DIR / f"{name}.yaml"
    if not path.is_file():
        return {}
    params = (((yaml.safe_load(path.read_text()) or {}).get("hydra") or {}).get("sweeper") or {}).get("params") or {}
    return {str(k): [v.strip() for v in str(value).split(",")] for k, value in params.items()}


def study_grid(study: Study) -> Grid:
    """What the study's command runs: its overrides, and the grid of the sweep file it names (an override on
    the command line replaces the sweep's values of that key, as Hydra's sweeper does)."""
    grid: Grid = {}
    swept: Grid = {}
    for token in study.command.removeprefix(LAUNCH).split():
        key, _, value = token.partition("=")
        if key.startswith("hydra."):
            continue
        grid[key] = value.split(",")
        if key == "+sweeps":
            swept.update(_sweep_params(value))
    return {**swept, **grid}


def _command(grid: Grid, study: Study, root: Path) -> str:
    overrides = [shlex.quote(f"{key}={','.join(values)}") for key, values in grid.items()]
    return " ".join([LAUNCH, *overrides, f"hydra.sweep.dir={study.path(root).as_posix()}"])


def _differences(grid: Grid, expected: Grid) -> list[str]:
    said = []
    for key, values in grid.items():
        shown = f"`{key}={','.join(values)}`"
        if key not in expected:
            said.append(f"{shown} added")
        elif set(values) != set(expected[key]):
            said.append(f"{shown} where the study runs `{key}={','.join(expected[key])}`")
    said += [f"`{key}` not set" for key in expected if key not in grid]
    return said


def made_by(settings: Settings, study: Study) -> tuple[str, str | None]:
    """The command behind the study's rows, and a note when it is not the study's own command (None when the
    rows are the study's whole grid, or their runs record no overrides)."""
    runs = run_overrides(study.path(settings.studies))
    own = study.command_in(settings.studies)  # into the folder the study used, not the default one
    if not runs:
        return own, None
    grid, expected = runs_grid(runs), study_grid(study)
    jobs = math.prod(len(values) for values in expected.values())
    same = {k: set(v) for k, v in grid.items()} == {k: set(v) for k, v in expected.items()}
    if same and len(runs) == jobs:
        return own, None
    said = _differences(grid, expected) if not same else []
    if len(runs) != math.prod(len(values) for values in grid.values()):
        said.append(f"{len(runs)} of the {math.prod(len(v) for v in grid.values())} combinations of these values")
    run_word = "run" if len(runs) == 1 else "runs"
    note = (
        f"The `{study.directory}` rows come from {len(runs)} {run_word} whose overrides are not the study's "
        f"command: {'; '.join(said)}. The whole study: `{own}`."
    )
    return _command(grid, study, settings.studies), note


def run_summaries(folder: Path) -> list[dict]:
    """The summary.json of each finished run under ``folder`` (a damaged one left out), in launch order."""
    found = []
    for rows in sorted(folder.rglob("rows.parquet"), key=lambda p: _job_order(p.parent)):
        try:
            summary = json.loads((rows.parent / "summary.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(summary, dict):
            found.append(summary)
    return found


def study_commands(section: Section, settings: Settings, studies: Sequence[Study], *then: str) -> None:
    """The commands that made the section's rows (each study's, or its rows' own where they differ, with a
    note saying how), then the commands ``then`` (the report's); then the data the runs read (each file's
    sha256) and the machines they ran on, as their summary.json files record them."""
    made = [made_by(settings, study) for study in studies]
    section.command(*(command for command, _ in made), *then)
    notes = [note for _, note in made if note]
    if notes:
        section.add(*notes, "")
    sources = source_lines(s for study in studies for s in run_summaries(study.path(settings.studies)))
    if sources:
        section.add(*sources, "")
