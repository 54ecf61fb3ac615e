"""``harness.run`` and ``harness.sweep``: the command line's jobs, run in this process.

A run is Hydra's own run of the command line's job (:func:`harness.cli.run_job`) on the config Hydra composes
from the package's conf/ for the same overrides: the same checks, caches, output folder (``hydra.run.dir``:
outputs/runs/DATE/TIME under the working directory), files and printed stage lines as
``python -m harness OVERRIDES``. A sweep is Hydra's multirun of the same job on its basic launcher, which runs
the jobs one after another in this process, as ``python -m harness -m OVERRIDES`` does with that launcher.
Jobs of one process share the stages they build from equal configs (the tokenizer, encoder and reader:
``harness.run.reuse``), so a second run does not load its models again.
"""

from __future__ import annotations

import logging
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hydra.core.global_hydra import GlobalHydra
from hydra.core.utils import JobReturn, run_job
from hydra.errors import HydraException
from hydra.initialize import initialize_config_dir
from hydra.types import HydraContext, RunMode
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from harness.cli import CONFIG_DIR, failed_jobs, failure_summary, mask_log_records
from harness.cli import run_job as harness_job
from harness.core import signals
from harness.run.config_check import ConfigError, launcher_problems

if TYPE_CHECKING:
    import pandas as pd

CONFIG_NAME = "config"
# Hydra names the command line's job after the module of its task function (harness/cli.py): its log file is
# cli.log and hydra.job.name "cli" in every saved config.
JOB_NAME = "cli"
BASIC_LAUNCHER = "hydra._internal.core_plugins.basic_launcher.BasicLauncher"
MULTIRUN_FLAGS = ("-m", "--multirun")


class OverrideError(ConfigError):
    """Overrides Hydra cannot compose into a config (an option a group does not have, a key the config lacks,
    a sweep's comma list given to a single run): Hydra's own message, as the command line prints it."""


class JobsFailed(RuntimeError):
    """Jobs of a sweep failed (each left ``error.txt`` in its folder); the others' rows are in ``folder``."""

    def __init__(self, message: str, folder: Path, failed: list[dict[str, Any]]) -> None:
        super().__init__(message)
        self.folder = folder
        self.failed = failed


@dataclass
class RunResult:
    """One finished run: its rows (rows.parquet), its summary (summary.json) and the folder holding them."""

    rows: pd.DataFrame = field(repr=False)
    summary: dict[str, Any] = field(repr=False)
    folder: Path

    @classmethod
    def read(cls, folder: str | Path) -> RunResult:
        import json

        import pandas as pd

        folder = Path(folder)
        summary = json.loads((folder / "summary.json").read_text(encoding="utf-8"))
        return cls(pd.read_parquet(folder / "rows.parquet"), summary, folder)


def run(overrides: Sequence[str] = ()) -> RunResult:
    """Run one configuration as ``python -m harness OVERRIDES`` does, in this process, and return its result.

    An invalid config raises :class:`ConfigError` (one line per problem, as the command line prints them)
    before any model loads; overrides Hydra cannot compose raise :class:`OverrideError`, a ConfigError.
    """
    overrides = _plain(overrides, multirun=False)
    with _job_state(), _hydra() as hydra:
        cfg = _composed(hydra, overrides, RunMode.RUN, "hydra.run.dir")
        callbacks = _callbacks(cfg)
        callbacks.on_run_start(config=cfg, config_name=CONFIG_NAME)
        done: JobReturn = run_job(
            hydra_context=HydraContext(config_loader=hydra.config_loader, callbacks=callbacks),
            task_function=_task,
            config=cfg,
            job_dir_key="hydra.run.dir",
            job_subdir_key=None,
        )
        callbacks.on_run_end(config=cfg, config_name=CONFIG_NAME, job_return=done)
        invalid = done.return_value  # raises the job's exception, as Hydra's own run does
    if invalid is not None:
        raise invalid
    assert done.hydra_cfg is not None
    return RunResult.read(str(done.hydra_cfg.hydra.runtime.output_dir))


def sweep(overrides: Sequence[str]) -> pd.DataFrame:
    """Run a sweep as ``python -m harness -m OVERRIDES`` does on Hydra's basic launcher (its jobs one after
    another, in this process) and return its rows as :func:`harness.load_runs` reads them.

    Other launchers (parallel, SLURM, Ray) start processes of their own: they stay the command line's. A job
    that fails leaves ``error.txt`` in its folder as on the command line, and :class:`JobsFailed` names them
    once the others are done.
    """
    overrides = _plain(overrides, multirun=True)
    for override in overrides:
        key, _, value = override.partition("=")
        if key.lstrip("+~") == "hydra/launcher" and value != "basic":
            raise _launcher_refused(override)
    with _job_state(), _hydra() as hydra:
        cfg = _composed(hydra, overrides, RunMode.MULTIRUN, "hydra.sweep.dir")
        target = OmegaConf.select(cfg, "hydra.launcher._target_", default=None)
        if target != BASIC_LAUNCHER:
            choice = OmegaConf.select(cfg, "hydra.runtime.choices.hydra/launcher", default=None)
            raise _launcher_refused(f"hydra/launcher={choice or target}")
        found = launcher_problems(cfg)
        if found:
            raise ConfigError(found)
        folder = Path(str(cfg.hydra.sweep.dir)).absolute()
        callbacks = _callbacks(cfg)
        callbacks.on_multirun_start(config=cfg, config_name=CONFIG_NAME)
        from hydra.core.plugins import Plugins

        sweeper = Plugins.instance().instantiate_sweeper(
            config=cfg,
            hydra_context=HydraContext(config_loader=hydra.config_loader, callbacks=callbacks),
            task_function=_task,
        )
        task_overrides = OmegaConf.to_container(cfg.hydra.overrides.task, resolve=False)
        assert isinstance(task_overrides, list)
        try:
            sweeper.sweep(arguments=task_overrides)
        except HydraException as error:  # a job's config (a sweep value) that does not compose: checked first
            raise OverrideError([str(error)]) from error
        callbacks.on_multirun_end(config=cfg, config_name=CONFIG_NAME)
    failed = failed_jobs(folder)  # what the command line's callback lists (and exits 1 for)
    if failed:
        message = f"{failure_summary(failed)}\nthe other jobs' rows: harness.load_runs({str(folder)!r})"
        raise JobsFailed(message, folder, failed)
    from harness.api.results import load_runs

    return load_runs(folder)


# ----------------------------------------------------------------------------------------------------------


def _task(cfg: DictConfig) -> ConfigError | None:
    """The command line's job; an invalid config is its value, raised by the caller as it stands (a failed
    job's value Hydra raises after printing the job's overrides)."""
    try:
        harness_job(cfg, exit_on_config_error=False)
    except ConfigError as error:
        return error
    return None


def _plain(overrides: Sequence[str], multirun: bool) -> list[str]:
    if isinstance(overrides, str):
        raise TypeError(f"overrides are a list of strings, e.g. [{overrides!r}], not one string")
    words = [str(o) for o in overrides if not (multirun and o in MULTIRUN_FLAGS)]
    for word in words:
        if word in MULTIRUN_FLAGS:
            raise ConfigError([f"{word}: a sweep is harness.sweep(overrides)"])
        if word.startswith("-"):
            raise ConfigError([f"{word}: only overrides are taken here; command-line flags are the command line's"])
    return words


def _launcher_refused(override: str) -> ConfigError:
    return ConfigError(
        [
            f"{override}: harness.sweep runs Hydra's basic launcher in this process; other launchers start "
            "processes of their own and stay the command line's: python -m harness -m ... "
            "(then harness.load_runs(SWEEP_FOLDER))"
        ]
    )


@contextmanager
def _hydra() -> Iterator[Any]:
    """Hydra initialised on the package's conf/ as the command line initialises it (its search path, its job
    name), and any Hydra the caller had initialised put back afterwards."""
    from hydra.initialize import get_gh_backup, restore_gh_from_backup

    backup = get_gh_backup()
    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=CONFIG_DIR, job_name=JOB_NAME, version_base="1.3"):
            yield GlobalHydra.instance().hydra
    finally:
        restore_gh_from_backup(backup)


# Output folders that a run or sweep of this process named by the clock (${now:...}) has used.
_clock_folders: set[Path] = set()


def _composed(hydra: Any, overrides: list[str], mode: RunMode, folder_key: str) -> DictConfig:
    """The config Hydra composes for the overrides, as the command line's ``hydra.run`` / ``hydra.multirun``
    compose it. A folder named by the clock to the second is never one an earlier call of this process wrote:
    two quick calls would otherwise share outputs/runs/DATE/TIME (the second waits for the next second)."""
    # As the command line: the mode a config sets, else the one asked for, as a Hydra override of its own.
    found = hydra.get_mode(config_name=CONFIG_NAME, overrides=overrides)
    if mode == RunMode.RUN and found == RunMode.MULTIRUN:
        raise ConfigError(["these overrides set hydra.mode=MULTIRUN, a sweep: harness.sweep(overrides)"])
    if found != mode:
        overrides = [*overrides, f"hydra.mode={mode.name}"]
    while True:
        try:
            cfg = hydra.compose_config(CONFIG_NAME, overrides, run_mode=mode, with_log_configuration=True)
        except (HydraException, OmegaConfBaseException) as error:
            raise OverrideError([str(error)]) from error
        written = OmegaConf.select(cfg, folder_key, throw_on_resolution_failure=False)
        raw = OmegaConf.to_container(cfg.hydra, resolve=False)
        assert isinstance(raw, dict)
        named_by_clock = "${now:" in str(raw[folder_key.split(".")[1]]["dir"])
        folder = Path(str(written)).absolute()
        if not named_by_clock or folder not in _clock_folders:
            if named_by_clock:
                _clock_folders.add(folder)
            return cfg
        time.sleep(1.0 - time.time() % 1.0 + 0.01)


def _callbacks(cfg: DictConfig) -> Any:
    from hydra._internal.callbacks import Callbacks

    return Callbacks(cfg)


@contextmanager
def _job_state() -> Iterator[None]:
    """What the command line's job sets for its process, put back for the caller's: the handlers of SIGTERM
    and SIGINT (a stop raises ``KeyboardInterrupt`` here, with the finished work kept), the root logger's
    handlers (Hydra adds the run's console and cli.log handlers) and ``sys.argv`` (masked by the job)."""
    handlers: dict[int, Callable[..., Any] | int | None] = {s: signal.getsignal(s) for s in signals.HANDLED}
    root = logging.getLogger()
    kept, level, argv = list(root.handlers), root.level, list(sys.argv)
    mask_log_records()
    try:
        yield
    except signals.Interrupted as stop:
        signals.reset()
        raise KeyboardInterrupt(str(stop)) from stop
    finally:
        for handler in root.handlers:
            if handler not in kept:
                handler.close()
        root.handlers[:], sys.argv[:] = kept, argv
        root.setLevel(level)
        if threading.current_thread() is threading.main_thread():  # elsewhere the job installed none
            for signum, handler in handlers.items():
                if handler is not None:
                    signal.signal(signum, handler)
