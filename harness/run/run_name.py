"""A run's name, for W&B and the summary's header: what sets it apart.

A job of a sweep is named after the keys its sweep varies (``packer=submod budget=96``): the sweep overrides of
the command line and the ``hydra.sweeper.params`` of a ``+sweeps`` file, read from the ``multirun.yaml`` Hydra
saves in the sweep folder before any job starts (so a job on a SLURM node or a Ray worker finds it too). A single
run is named after the overrides it was given. Plumbing (``hydra.*``, ``logger``, ``paths``, ``cache``) is never
part of a name, nor is the reader of a run that reads nothing (``read=false``).
"""

from __future__ import annotations

import logging
from functools import lru_cache
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf

log = logging.getLogger(__name__)
PLUMBING = ("hydra", "logger", "paths", "cache", "read_chunk")


def _key(override: Any) -> str:
    return str(override.get_key_element()).lstrip("+~")


@lru_cache(maxsize=1)
def _parser():
    from hydra.core.override_parser.overrides_parser import OverridesParser

    return OverridesParser.create()  # built once per process: every job of a sweep names itself


def _parsed(lines: list[str]) -> list[Any]:
    return _parser().parse_overrides([str(line) for line in lines])


def swept_keys(sweep_dir: str | Path) -> list[str] | None:
    """The keys a multirun varies, in command-line order, from its ``multirun.yaml``; None when it is absent."""
    path = Path(sweep_dir) / "multirun.yaml"
    if not path.is_file():
        return None
    stamp = path.stat()
    return list(_swept_keys(str(path), stamp.st_mtime_ns, stamp.st_size))


@lru_cache(maxsize=8)
def _swept_keys(path: str, mtime_ns: int, size: int) -> tuple[str, ...]:
    """Read once per sweep file and version: every job of a sweep in one process asks the same."""
    master = OmegaConf.load(path)
    task = list(OmegaConf.select(master, "hydra.overrides.task", default=[]) or [])
    params = OmegaConf.select(master, "hydra.sweeper.params", default=None) or {}
    lines = [*task, *(f"{key}={value}" for key, value in params.items())]
    return tuple(dict.fromkeys(_key(o) for o in _parsed(lines) if o.is_sweep_override()))


def _named(key: str, reads: bool) -> bool:
    if key.split(".")[0].split("/")[0] in PLUMBING:
        return False
    return reads or not (key == "reader" or key.startswith(("reader.", "reader@", "prompt")))


def run_name(task_overrides: list[str], reads: bool, sweep_dir: str | Path | None = None) -> str | None:
    """``packer=submod budget=96``: the job's values of the keys that set it apart; ``defaults`` when none."""
    values = {_key(o): o.input_line.split("=", 1)[1] for o in _parsed(task_overrides) if "=" in o.input_line}
    keys = swept_keys(sweep_dir) if sweep_dir is not None else None
    if keys is None:  # a single run, or a sweep whose multirun.yaml is not here: the overrides it was given
        keys = list(values)
    named = [f"{key}={values[key]}" for key in keys if key in values and _named(key, reads)]
    return " ".join(named) or "defaults"


def current_run_name(reads: bool) -> str | None:
    """:func:`run_name` of the Hydra job running now; None outside one."""
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    if not HydraConfig.initialized():
        return None
    hydra = HydraConfig.get()
    sweep_dir = hydra.sweep.dir if hydra.mode == RunMode.MULTIRUN else None
    try:
        return run_name(list(hydra.overrides.task), reads, sweep_dir)
    except Exception as error:  # noqa: BLE001 - a name is a label: it never fails the run whose results it names
        log.warning("no run name from the overrides (%s); the summary keeps its keys", error)
        return None
