"""No password in a folder name: the run and sweep folders Hydra creates are masked at composition.

A run folder built from ``${hydra.job.override_dirname}`` (the common ``hydra.sweep.subdir`` of a sweep)
would carry ``cache.url=postgresql://user:SECRET@host/db`` into the file system, where every listing, log
line and copied path shows it. Hydra creates the folder before any harness code runs, so the composed config
itself is masked (:func:`harness.cache.postgres.redacted`): ``hydra.job.override_dirname``, and
``hydra.run.dir``, ``hydra.sweep.dir`` and ``hydra.sweep.subdir`` where they resolve to a text holding a
password. A folder whose name still would (an interpolation that resolves only when the job starts) is
refused by the config check (:func:`secret_folder_problems`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from hydra._internal.config_loader_impl import ConfigLoaderImpl
from omegaconf import DictConfig, OmegaConf, open_dict, read_write
from omegaconf.errors import OmegaConfBaseException

from harness.cache.postgres import redacted

_installed = False
FOLDER_KEYS = ("hydra.job.override_dirname", "hydra.run.dir", "hydra.sweep.dir", "hydra.sweep.subdir")


def mask_folders(config: Any) -> Any:
    """``config`` (a composed config, hydra node included) with a password in a folder key masked."""
    if not isinstance(config, DictConfig) or "hydra" not in config:
        return config
    for key in FOLDER_KEYS:
        try:
            value = OmegaConf.select(config, key, throw_on_resolution_failure=False)
        except OmegaConfBaseException:
            continue
        if isinstance(value, str) and redacted(value) != value:
            with read_write(config), open_dict(config):
                OmegaConf.update(config, key, redacted(value), merge=False)
    return config


def install() -> None:
    """Mask every composition Hydra makes (a run's, a sweep's, each sweep job's); once per process."""
    global _installed
    if _installed:
        return
    _installed = True
    for name in ("load_configuration", "load_sweep_config"):
        original: Callable[..., Any] = getattr(ConfigLoaderImpl, name)

        @functools.wraps(original)
        def masked(*args: Any, _original: Callable[..., Any] = original, **kwargs: Any) -> Any:
            return mask_folders(_original(*args, **kwargs))

        setattr(ConfigLoaderImpl, name, masked)


def secret_folder_problems(output_dir: str | None) -> list[str]:
    """The job's output folder, when its name holds a password."""
    if output_dir is None or redacted(output_dir) == output_dir:
        return []
    return [
        f"the run folder {redacted(output_dir)!r} holds a password (from cache.url); allowed: hydra.run.dir, "
        "hydra.sweep.dir and hydra.sweep.subdir without cache.url (HARNESS_CACHE_URL keeps it out of overrides)"
    ]
