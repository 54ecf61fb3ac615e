"""Each sweep job's config composed once, not twice, from config files read once per process.

Hydra's sweeper composes every job's config to check a batch before it launches it
(``Sweeper.validate_batch_is_legal``), and the launcher then composes the same overrides again to run the
job: about 0.2 s each for this config tree, as much as a reader-free job's whole packing work. With
``compose_once()`` installed, a composition is kept from the check and handed to the launcher's first
request for the same master config and overrides; any other request composes as before. Launchers that
compose in the launching process (basic, submitit, ray) gain; joblib composes again in its workers. At
most ``KEPT_COMPOSITIONS`` are held, so a sweep of thousands of jobs (or a launcher that never asks in
this process) holds a bounded number of configs.

A third of each composition is Hydra reading and parsing the same YAML files (and their defaults lists)
again, because its per-composition cache starts empty. ``compose_once()`` also keeps each loaded file
for the process, keyed by the search path and the file's modification time, and hands out deep copies,
so a composition may change what it gets without touching what the next one reads.
"""

from __future__ import annotations

import copy
import os
from typing import Any

from hydra._internal.config_loader_impl import ConfigLoaderImpl
from hydra._internal.config_repository import ConfigRepository
from hydra.plugins.config_source import ConfigResult, ConfigSource

_MARK = "_harness_compose_once"
# Config sources that cannot change while the process runs: installed packages. Files may be edited, so
# they are re-read when their modification time or size changes; structured configs (the ConfigStore,
# filled at run time) are never kept.
_PACKAGE_SCHEMES = ("pkg://",)
KEPT_COMPOSITIONS = 256


def compose_once() -> None:
    """Wrap ``ConfigLoaderImpl.load_sweep_config`` and ``ConfigRepository.load_config`` (idempotent)."""
    original = ConfigLoaderImpl.load_sweep_config
    if getattr(original, _MARK, False):
        return
    # (id(master), overrides) -> (master, composed config): the master is held so its id stays its own.
    kept: dict[tuple[int, tuple[str, ...]], tuple[Any, Any]] = {}

    def load_sweep_config(self: ConfigLoaderImpl, master_config: Any, sweep_overrides: list[str]) -> Any:
        key = (id(master_config), tuple(sweep_overrides))
        held = kept.pop(key, None)
        if held is not None and held[0] is master_config:
            return held[1]
        composed = original(self, master_config, sweep_overrides)
        if held is None and len(kept) < KEPT_COMPOSITIONS:
            # First request (the sweeper's check, which only looks at it): kept for the launcher.
            kept[key] = (master_config, composed)
        return composed

    setattr(load_sweep_config, _MARK, True)
    ConfigLoaderImpl.load_sweep_config = load_sweep_config  # type: ignore[method-assign]
    _keep_loaded_configs()


def _file_stamp(result: ConfigResult, config_path: str) -> tuple[int, int] | None:
    """Modification time and size of the YAML file a file source read ``config_path`` from."""
    directory = result.path.removeprefix("file://")
    try:
        stat = os.stat(os.path.join(directory, ConfigSource._normalize_file_name(config_path)))
    except OSError:
        return None
    return stat.st_mtime_ns, stat.st_size


def _keep_loaded_configs() -> None:
    original = ConfigRepository.load_config
    # (search path, config path) -> (file stamp or None for a package, loaded result)
    loaded: dict[tuple[tuple[tuple[str | None, str | None], ...], str], tuple[Any, ConfigResult]] = {}

    def load_config(self: ConfigRepository, config_path: str) -> ConfigResult | None:
        key = (tuple((source.provider, source.path) for source in self.sources), config_path)
        held = loaded.get(key)
        if held is not None and (held[0] is None or held[0] == _file_stamp(held[1], config_path)):
            return copy.deepcopy(held[1])
        result = original(self, config_path)
        if result is None:
            return None
        if result.path.startswith("file://"):
            stamp = _file_stamp(result, config_path)
            if stamp is not None:
                loaded[key] = (stamp, copy.deepcopy(result))
        elif result.path.startswith(_PACKAGE_SCHEMES):
            loaded[key] = (None, copy.deepcopy(result))
        return result

    ConfigRepository.load_config = load_config  # type: ignore[method-assign]
