"""The commands of the documentation pages: fenced ``bash`` blocks of README.md and docs/*.md, split into
command lines (comments dropped, backslash continuations joined, leading ``VAR=value`` assignments kept
apart), the overrides of each ``python -m harness`` line and the jobs of a ``-m`` sweep.

Run as ``python -m tests.helpers.doc_commands FILE.json`` it executes many ``python -m harness`` and
``python -m harness.report`` command lines in this one process (a list of ``{"argv": [...], "env": {...}}``),
one after another, and writes each exit status back into FILE.json: the imports and loaded models are paid
once instead of once per command.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import shlex
import sys
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PAGES = (REPO / "README.md", *sorted((REPO / "docs").glob("*.md")))
ASSIGNMENT = re.compile(r"^[A-Z_][A-Z0-9_]*=")


def fenced_blocks(page: Path, language: str = "bash") -> list[str]:
    """The text of every ```language block of the page."""
    return re.findall(rf"^```{language}\n(.*?)^```", page.read_text(), flags=re.S | re.M)


@dataclass(frozen=True)
class Command:
    """One command line of a page: its words after any ``VAR=value`` prefixes, and those assignments."""

    page: str
    words: tuple[str, ...]
    env: tuple[tuple[str, str], ...] = field(default=())

    @property
    def program(self) -> str:
        return self.words[0] if self.words else ""

    @property
    def module(self) -> str | None:
        """``harness.report`` for ``python -m harness.report ...``; None for anything else."""
        if len(self.words) >= 3 and self.words[0] in ("python", ".venv/bin/python") and self.words[1] == "-m":
            return self.words[2]
        return None

    @property
    def arguments(self) -> list[str]:
        return list(self.words[3:]) if self.module else list(self.words[1:])

    def __str__(self) -> str:
        return " ".join(self.words)


def command_lines(page: Path) -> list[Command]:
    """Every command line in the page's bash blocks. A line ending in a backslash continues on the next;
    ``# ...`` comments are dropped, as the shell drops them; ``for ...; do ...; done`` loops are kept whole."""
    found = []
    for block in fenced_blocks(page):
        for line in block.replace("\\\n", " ").splitlines():
            words = shlex.split(line, comments=True)
            env = []
            while words and ASSIGNMENT.match(words[0]):
                key, _, value = words.pop(0).partition("=")
                env.append((key, value))
            if words:
                found.append(Command(page.name, tuple(words), tuple(env)))
    return found


def all_commands(pages: tuple[Path, ...] = PAGES) -> list[Command]:
    return [command for page in pages for command in command_lines(page)]


def harness_commands(pages: tuple[Path, ...] = PAGES) -> list[Command]:
    """The ``python -m harness <overrides>`` lines (the main job and its sweeps)."""
    return [c for c in all_commands(pages) if c.module == "harness"]


# Hydra's flags that take a value (``--cfg job``), and those that take none.
VALUE_FLAGS = ("--cfg", "-c", "--package", "-p", "--config-name", "-cn", "--config-dir", "-cd")


def overrides(command: Command) -> list[str]:
    """The Hydra overrides of a ``python -m harness`` line: its arguments less ``-m`` and the flags."""
    words, kept = command.arguments, []
    for index, word in enumerate(words):
        if word == "-m" or word.startswith("-") or (index and words[index - 1] in VALUE_FLAGS):
            continue
        kept.append(word)
    return kept


def sweep_points(arguments: list[str]) -> list[list[str]]:
    """The jobs of a ``-m`` command line (each comma-separated value in turn); a single run as it is.
    A value in brackets is a list, not a sweep."""
    if "-m" not in arguments:
        return [arguments]
    choices = [
        [f"{key}={value}" for value in values.split(",")] if "," in values and not values.startswith("[") else [o]
        for o in arguments
        if o != "-m"
        for key, _, values in [o.partition("=")]
    ]
    return [list(point) for point in itertools.product(*choices)]


def run_in_one_process(jobs: list[dict], cwd: Path, env: dict[str, str], timeout: float) -> list[int]:
    """Exit status of each job (``{"argv": [module, *arguments], "env": {...}}``), all run by one process."""
    import subprocess
    import tempfile

    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as handle:
        json.dump(jobs, handle)
    try:
        result = subprocess.run(
            [sys.executable, "-m", "tests.helpers.doc_commands", handle.name],
            cwd=cwd,
            env={**env, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))},
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        if result.returncode != 0:
            raise AssertionError(f"the command runner failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}")
        return json.loads(Path(handle.name).read_text())
    finally:
        os.unlink(handle.name)


def _run_one(argv: list[str]) -> int:
    """One command line in this process: ``harness`` through Hydra (its global state cleared afterwards),
    ``harness.report`` (and its ``view`` / ``diff`` / ``replicate`` commands) and ``harness.runlog.wandb_report``."""
    module, arguments = argv[0], argv[1:]
    try:
        if module == "harness":
            from hydra.core.global_hydra import GlobalHydra

            from harness.cli import main

            sys.argv = ["harness", *arguments]
            try:
                main()
            finally:
                GlobalHydra.instance().clear()
            return 0
        if module == "harness.report" and arguments[:1] == ["view"]:
            from harness.report.viewer import main as view

            return int(view(arguments[1:]) or 0)
        if module == "harness.report" and arguments[:1] == ["diff"]:
            from harness.report.diff import main as diff

            return int(diff(arguments[1:]) or 0)
        if module == "harness.report" and arguments[:1] == ["replicate"]:
            from harness.report.replication import main as replicate

            return int(replicate(arguments[1:]) or 0)
        if module == "harness.report":
            from harness.report.cli import main as report

            return int(report(arguments) or 0)
        if module == "harness.runlog.wandb_report":
            from harness.runlog.wandb_report import main as wandb_report

            return int(wandb_report(arguments) or 0)
        raise ValueError(f"no in-process runner for python -m {module}")
    except SystemExit as stop:
        return stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 1)
    except Exception as error:  # noqa: BLE001 - reported as the command's failure, the next one still runs
        print(f"python -m {' '.join(argv)}: {error!r}", file=sys.stderr)
        return 1


def _main(path: str) -> None:
    jobs = json.loads(Path(path).read_text())
    statuses = []
    for job in jobs:
        saved = dict(os.environ)
        os.environ.update(job.get("env", {}))
        print(f"== python -m {' '.join(job['argv'])}", flush=True)
        try:
            statuses.append(_run_one(job["argv"]))
        finally:
            os.environ.clear()
            os.environ.update(saved)
    Path(path).write_text(json.dumps(statuses))


if __name__ == "__main__":
    _main(sys.argv[1])
