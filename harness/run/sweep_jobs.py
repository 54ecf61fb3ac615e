"""The jobs a multirun will launch, worked out from its master config alone, before anything starts.

Hydra resolves a launcher's settings (``gpus_per_node``, ``num_gpus``, ``n_jobs``) once, against the
multirun's *master* config: the command line with every sweep left out. A reader swept by
``reader=a,b`` or by a sweep file's ``hydra.sweeper.params`` is not in it, and ``--cfg hydra`` prints the
hydra node alone, without any reader. So the launcher resolvers (``harness.run.device_check``) and
``python -m harness.preview`` enumerate the jobs here as Hydra's basic sweeper does (the sweep file's
params, then the command line's task overrides, crossed in that order) and compose each job as the
launcher will (``hydra.overrides.hydra`` + the job's overrides, in run mode).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from hydra._internal.config_loader_impl import ConfigLoaderImpl
from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import Override, OverrideType, ValueType
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf

from harness.plan.cli import CONFIG_DIR

BASIC_SWEEPER = "hydra._internal.core_plugins.basic_sweeper.BasicSweeper"


def config_loader() -> ConfigLoaderImpl:
    """The running application's config loader (its search path, ``--config-dir`` included), or one over
    the harness's own ``conf/`` when no Hydra application is initialized."""
    from hydra.core.global_hydra import GlobalHydra

    if GlobalHydra.instance().is_initialized():
        loader = GlobalHydra.instance().config_loader()
        assert isinstance(loader, ConfigLoaderImpl)
        return loader
    return _own_loader()


@lru_cache(maxsize=1)
def _own_loader() -> ConfigLoaderImpl:
    from hydra._internal.utils import create_config_search_path

    return ConfigLoaderImpl(config_search_path=create_config_search_path(str(CONFIG_DIR)))


def _strings(node: Any) -> list[str]:
    values = OmegaConf.to_container(node, resolve=False) if node is not None else []
    return [str(value) for value in values or []]


def sweep_arguments(cfg: DictConfig) -> list[str]:
    """What the basic sweeper crosses: the sweep file's params, then the command line's task overrides."""
    params = OmegaConf.select(cfg, "hydra.sweeper.params", default=None) or {}
    return [f"{key}={value}" for key, value in params.items()] + _strings(cfg.hydra.overrides.task)


def job_overrides(cfg: DictConfig, loader: ConfigLoaderImpl | None = None) -> list[list[str]]:
    """Each job's overrides, in the order the basic sweeper launches them (one job for a plain run)."""
    target = str(OmegaConf.select(cfg, "hydra.sweeper._target_", default=BASIC_SWEEPER))
    if target != BASIC_SWEEPER:
        raise ValueError(f"hydra.sweeper._target_={target}: jobs are enumerated for Hydra's basic sweeper only")
    parser = OverridesParser.create(config_loader=loader or config_loader())
    parsed = parser.parse_overrides(sweep_arguments(cfg))
    return [list(job) for batch in BasicSweeper.split_arguments(parsed, None) for job in batch]


def is_one_job(cfg: DictConfig) -> bool:
    """Whether ``cfg`` is one job's config (a plain run, or a job a launcher composed), not a multirun's
    master: no task override sweeps, and each of the sweep file's params is set by a task override."""
    parsed = OverridesParser.create().parse_overrides(_strings(cfg.hydra.overrides.task))
    if any(override.is_sweep_override() for override in parsed):
        return False
    params = OmegaConf.select(cfg, "hydra.sweeper.params", default=None) or {}
    set_keys = {override.get_key_element().lstrip("+~") for override in parsed}
    return all(str(key) in set_keys for key in params)


def compose_job(cfg: DictConfig, overrides: list[str], loader: ConfigLoaderImpl | None = None) -> DictConfig:
    """One job's config as the launcher composes it (``ConfigLoaderImpl.load_sweep_config``)."""
    hydra_overrides = _strings(cfg.hydra.overrides.hydra)
    return (loader or config_loader()).load_configuration(
        config_name=str(cfg.hydra.job.config_name), overrides=[*hydra_overrides, *overrides], run_mode=RunMode.RUN
    )


def _reader_free(loader: ConfigLoaderImpl, override: Override) -> bool:
    """An override that cannot change the reader: a plain value of a key outside ``reader``, or the choice of
    a config group other than ``reader`` whose option is packaged under its group (not ``_global_``)."""
    key = override.key_or_group.lstrip("+~")
    if key == "reader" or key.startswith(("reader.", "reader/")) or override.package is not None:
        return False
    if not loader.repository.group_exists(key):
        return override.type == OverrideType.CHANGE and override.value_type == ValueType.ELEMENT
    value = override.value()
    if not isinstance(value, str):
        return False
    loaded = loader.repository.load_config(f"{key}/{value}")
    return loaded is not None and (loaded.header or {}).get("package") != "_global_"


def distinct_reader_jobs(cfg: DictConfig, loader: ConfigLoaderImpl | None = None) -> list[list[str]]:
    """One job per distinct reader setting of the sweep: jobs that differ only in overrides that cannot
    change the reader (``budget=96`` vs ``160``, ``packer=...``) compose the same reader."""
    loader = loader or config_loader()
    parser = OverridesParser.create(config_loader=loader)
    kept: dict[tuple[str, ...], list[str]] = {}
    for job in job_overrides(cfg, loader):
        key = tuple(o.input_line or "" for o in parser.parse_overrides(job) if not _reader_free(loader, o))
        kept.setdefault(key, job)
    return list(kept.values())


_READERS: dict[tuple[Any, ...], list[dict[str, Any]]] = {}


def launched_readers(cfg: DictConfig) -> list[dict[str, Any]]:
    """The reader configs (resolved) of the jobs a launcher configured by ``cfg`` would start: the config's
    own reader when it is one job's config, else each distinct reader of the multirun's jobs. Kept per
    process: Ray's launcher resolves its settings once per job."""
    reader = OmegaConf.select(cfg, "reader", default=None) if "reader" in cfg else None
    if "hydra" not in cfg or (isinstance(reader, DictConfig) and is_one_job(cfg)):
        plain = OmegaConf.to_container(reader, resolve=True) if isinstance(reader, DictConfig) else None
        return [plain] if isinstance(plain, dict) else []
    key = (
        str(cfg.hydra.job.config_name),
        tuple(_strings(cfg.hydra.overrides.hydra)),
        tuple(_strings(cfg.hydra.overrides.task)),
        tuple(sweep_arguments(cfg)),
    )
    if key not in _READERS:
        loader = config_loader()
        readers = []
        for job in distinct_reader_jobs(cfg, loader):
            plain = OmegaConf.to_container(compose_job(cfg, job, loader).reader, resolve=True)
            assert isinstance(plain, dict)
            readers.append(plain)
        _READERS[key] = readers
    return _READERS[key]
