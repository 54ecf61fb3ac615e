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

Most jobs of a sweep differ from an earlier one only in plain values (``budget=96`` vs ``budget=160``,
``seed``): their defaults list, and so every merged file, is the same. Such a job's config is *derived*:
a deep copy of the earlier job's composition with Hydra's own override step applied to it
(``ConfigLoaderImpl._apply_overrides_to_config``), its task overrides and ``override_dirname`` rebuilt as
Hydra builds them. Only overrides that Hydra would apply the same way on top of either config are derived:
plain ``key=value`` changes of keys that are not config groups, to scalar values, the same keys in the same
order as the earlier job's; every other job is composed in full. tests/test_sweep_compose.py checks every
published sweep's jobs against full compositions, the hydra node included.
"""

from __future__ import annotations

import copy
import os
from collections import deque
from dataclasses import dataclass
from typing import Any

from hydra._internal.config_loader_impl import ConfigLoaderImpl, get_overrides_dirname
from hydra._internal.config_repository import ConfigRepository
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import Override, OverrideType, ValueType
from hydra.plugins.config_source import ConfigResult, ConfigSource
from omegaconf import DictConfig, OmegaConf, open_dict

from harness.core.model_files import files_signature
from harness.run import secret_paths

_MARK = "_harness_compose_once"
# Config sources that cannot change while the process runs: installed packages. Files may be edited, so
# they are re-read when their modification time or size changes; structured configs (the ConfigStore,
# filled at run time) are never kept.
_PACKAGE_SCHEMES = ("pkg://",)
KEPT_COMPOSITIONS = 256


def compose_once() -> None:
    """Wrap ``ConfigLoaderImpl.load_sweep_config`` and ``ConfigRepository.load_config`` (idempotent)."""
    secret_paths.install()  # first: the full compositions below are masked ones
    original = ConfigLoaderImpl.load_sweep_config
    if getattr(original, _MARK, False):
        return
    # (id(master), overrides) -> (master, composed config): the master is held so its id stays its own.
    kept: dict[tuple[int, tuple[str, ...]], tuple[Any, Any]] = {}

    templates = _Templates()

    def load_sweep_config(self: ConfigLoaderImpl, master_config: Any, sweep_overrides: list[str]) -> Any:
        key = (id(master_config), tuple(sweep_overrides))
        held = kept.pop(key, None)
        if held is not None and held[0] is master_config:
            return held[1]
        split = templates.split(self, master_config, sweep_overrides)
        composed = None if split is None else templates.derive(master_config, split)
        if composed is None:
            composed = original(self, master_config, sweep_overrides)
            if split is not None:
                templates.add(master_config, split, composed)
        if held is None and len(kept) < KEPT_COMPOSITIONS:
            # First request (the sweeper's check, which only looks at it): kept for the launcher.
            kept[key] = (master_config, composed)
        return composed

    setattr(load_sweep_config, _MARK, True)
    load_sweep_config.__wrapped__ = original  # type: ignore[attr-defined]  # a full composition, for tests
    ConfigLoaderImpl.load_sweep_config = load_sweep_config  # type: ignore[method-assign]
    _keep_loaded_configs()


def _file_stamp(result: ConfigResult, config_path: str) -> tuple | None:
    """The signature (size, modification time) of the YAML file a file source read ``config_path`` from."""
    directory = result.path.removeprefix("file://")
    return files_signature(os.path.join(directory, ConfigSource._normalize_file_name(config_path))) or None


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


@dataclass
class _Split:
    """A job's overrides: all of them parsed, the derivable values, and the key of the template they fit:
    (every override that is not a derivable value, as written; the derivable values' keys, in order)."""

    parsed: list[Override]
    values: list[Override]
    key: tuple[tuple[str, ...], tuple[str, ...]]


@dataclass
class _Template:
    """A job's full composition and what it was composed from."""

    master: Any
    key: tuple[tuple[str, ...], tuple[str, ...]]
    config: DictConfig


class _Templates:
    """Full compositions that later jobs derive their configs from (one per set of group choices)."""

    LIMIT = 64

    def __init__(self) -> None:
        # The newest first to stay: a long-lived process (a notebook's harness.sweep calls, a test worker) runs
        # sweep after sweep, and a full store that refused new templates would derive no job of a later sweep.
        self.held: deque[_Template] = deque(maxlen=self.LIMIT)
        self.parser = OverridesParser.create()

    def split(self, loader: ConfigLoaderImpl, master: Any, overrides: list[str]) -> _Split | None:
        """A job's parsed overrides and its template key, or None when the master config extends the search
        path (group look-ups would need Hydra's own repository)."""
        if master.hydra.get("searchpath"):
            return None
        # As written, not resolved: an override's value may be an interpolation (${hydra.job.override_dirname}).
        hydra_overrides = OmegaConf.to_container(master.hydra.overrides.hydra)
        assert isinstance(hydra_overrides, list)
        parsed = self.parser.parse_overrides(overrides=[*hydra_overrides, *overrides])
        groups, values = [], []
        for override in parsed:
            if _is_plain_value(loader, override):
                values.append(override)
            else:
                groups.append(override.input_line or "")
        return _Split(parsed, values, (tuple(groups), tuple(v.key_or_group for v in values)))

    def _find(self, master: Any, split: _Split) -> _Template | None:
        return next((t for t in self.held if t.master is master and t.key == split.key), None)

    def add(self, master: Any, split: _Split, composed: DictConfig) -> None:
        if self._find(master, split) is None:
            self.held.append(_Template(master, split.key, copy.deepcopy(composed)))

    def derive(self, master: Any, split: _Split) -> DictConfig | None:
        template = self._find(master, split)
        if template is None:
            return None
        config = copy.deepcopy(template.config)
        # What _load_configuration_impl does after merging the defaults list, for the values that differ.
        ConfigLoaderImpl._apply_overrides_to_config(split.values, config)
        task = [o for o in split.parsed if not o.is_hydra_override()]
        job = config.hydra.job
        with open_dict(config.hydra):
            config.hydra.overrides.hydra = [o.input_line for o in split.parsed if o.is_hydra_override()]
            config.hydra.overrides.task = [o.input_line for o in task]
            job.override_dirname = get_overrides_dirname(
                overrides=task,
                kv_sep=job.config.override_dirname.kv_sep,
                item_sep=job.config.override_dirname.item_sep,
                exclude_keys=job.config.override_dirname.exclude_keys,
            )
        # As load_sweep_config does: the master's resolver cache (timestamps) for every job.
        OmegaConf.copy_cache(from_config=master, to_config=config)
        return secret_paths.mask_folders(config)


def _is_plain_value(loader: ConfigLoaderImpl, override: Override) -> bool:
    """A ``key=value`` change of a config key (not a group) to one scalar: applied on top of any config
    with the same defaults list, it gives what a full composition gives."""
    if override.type != OverrideType.CHANGE or override.package is not None:
        return False
    if override.value_type != ValueType.ELEMENT or isinstance(override.value(), dict | list):
        return False
    key = override.key_or_group
    return "/" not in key and not loader.repository.group_exists(key)
