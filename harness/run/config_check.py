"""Checks of a composed config that run before any model or file is loaded.

A value out of range would otherwise surface only after the encoder and reader have loaded (tens of
seconds) or, worse, not at all. Every problem is reported on one line naming the key, the bad value and
what is allowed; the command line exits with status 2 for them.
"""

from __future__ import annotations

import ast
import os
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, ListConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from harness.cache.network_fs import POLICIES
from harness.cache.postgres import is_url, redacted
from harness.core.values import is_int, is_number
from harness.data.fetch.registry import fetch_hint
from harness.metrics.answers import ANSWER_SCORERS
from harness.metrics.longform import DATASET_SCORERS, scorer
from harness.run.check_values import closest, select
from harness.run.cpu_check import cpu_problems
from harness.run.device_check import device_problems
from harness.run.install_check import kernels_problems, version_problems
from harness.run.launcher_check import RAY_CONNECT_SECONDS, launcher_problems, ray_address_problems
from harness.run.retriever_check import empty_corpus_problems, retriever_problems
from harness.run.secret_paths import secret_folder_problems
from harness.run.service_check import (
    LIBPQ_PARAMETERS,
    SSLMODES,
    is_vllm_reader,
    reader_class_problems,
    server_url_problems,
    url_problems,
    vllm_problems,
)

# Re-exported: the command line and the tests import every check from here.
__all__ = [
    "CONFIG_FILE",
    "LIBPQ_PARAMETERS",
    "RAY_CONNECT_SECONDS",
    "RULES",
    "SSLMODES",
    "ConfigError",
    "Rule",
    "allowed_top_level_keys",
    "closest",
    "is_vllm_reader",
    "launcher_problems",
    "problems",
    "ray_address_problems",
    "url_problems",
    "validate",
    "vllm_problems",
]

CONFIG_FILE = Path(__file__).resolve().parents[2] / "conf" / "config.yaml"
PACKAGE_DIR = Path(__file__).resolve().parents[1]

# Top-level keys that are not in config.yaml's body but are legitimately present in a composed config.
_EXTRA_TOP_LEVEL = {"hydra"}


class ConfigError(ValueError):
    """One or more config values are invalid; ``problems`` holds one line per value."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = list(problems)
        super().__init__("\n".join(self.problems))


@dataclass(frozen=True)
class Rule:
    key: str  # dotted key; the rule applies only when the key is present
    ok: Callable[[Any], bool]
    allowed: str  # the allowed range, in words
    nullable: bool = False


def _int_at_least(low: int) -> Callable[[Any], bool]:
    return lambda v: is_int(v) and v >= low


def _closed(low: float, high: float) -> Callable[[Any], bool]:
    return lambda v: is_number(v) and low <= v <= high


def _known_scorer(name: Any) -> bool:
    try:
        scorer(str(name))
    except ValueError:
        return False
    return True


def _known_scorers(value: Any) -> bool:
    return isinstance(value, (list, ListConfig)) and all(_known_scorer(name) for name in value)


RULES = [
    Rule("seed", is_int, "an integer"),
    Rule("budget", _int_at_least(1), "an integer >= 1 (reader tokens)"),
    Rule("k", _int_at_least(1), "an integer >= 1"),
    Rule("read", lambda v: isinstance(v, bool), "true or false"),
    Rule("read_chunk", _int_at_least(1), "an integer >= 1"),
    Rule("dataset.sample_size", _int_at_least(1), "an integer >= 1, or null for every question", nullable=True),
    Rule(
        "dataset.scorers",
        _known_scorers,
        f"a list of dataset scorers ({', '.join(DATASET_SCORERS)}, or a function's import path), or null",
        nullable=True,
    ),
    Rule(
        "dataset.answer_scorer",
        lambda v: v in ANSWER_SCORERS,
        f"one of {', '.join(ANSWER_SCORERS)} (the official script whose EM/F1 rule applies)",
    ),
    Rule("perturb.rho", _closed(0.0, 1.0), "a number in [0, 1]"),
    Rule("perturb.gold_share", _closed(0.0, 1.0), "a number in [0, 1]"),
    Rule("perturb.overlap", lambda v: is_number(v) and 0.0 <= v < 1.0, "a number in [0, 1)"),
    Rule("perturb.window_words", _int_at_least(1), "an integer >= 1"),
    # Weights of relevance against diversity: MMR's lambda (diversifier, the rule's inner MMR, the packer)
    # and the Vendi diversifier's relevance weight; out of [0, 1] they would reward irrelevance.
    Rule("diversifier.lambda_", _closed(0.0, 1.0), "a number in [0, 1] (1 = relevance only)"),
    Rule("diversifier.inner.lambda_", _closed(0.0, 1.0), "a number in [0, 1] (1 = relevance only)"),
    Rule("packer.relevance_weight", _closed(0.0, 1.0), "a number in [0, 1] (1 = relevance only)"),
    Rule("retriever.pool_size", _int_at_least(1), "an integer >= 1, or null for every document", nullable=True),
    Rule("reader.batch_size", _int_at_least(1), "an integer >= 1"),
    Rule("reader.max_new_tokens", _int_at_least(1), "an integer >= 1"),
    Rule("cache.force", lambda v: isinstance(v, bool), "true or false"),
    Rule("cache.network_fs", lambda v: v in POLICIES, f"one of {', '.join(POLICIES)}"),
    Rule("cache.connect_timeout_s", lambda v: is_number(v) and v > 0, "a number of seconds > 0 (retries included)"),
    Rule("cache.url", is_url, "a postgresql:// URL, or null for SQLite files under paths.cache_dir", nullable=True),
]


def allowed_top_level_keys(config_file: Path = CONFIG_FILE) -> set[str]:
    """The keys config.yaml defines plus one per config group of its defaults list, so a key added there
    is allowed without touching this module."""
    return set(_top_level_keys(str(config_file), Path(config_file).stat().st_mtime_ns))


@lru_cache(maxsize=8)
def _top_level_keys(config_file: str, mtime_ns: int) -> frozenset[str]:
    # Parsed once per process and file version: every sweep job is checked, twice (command line, pipeline).
    base = OmegaConf.load(config_file)
    keys = {str(k) for k in base if k != "defaults"}
    for entry in base.get("defaults", []):
        if isinstance(entry, str):
            continue
        for group in entry:
            group = str(group)
            if not group.startswith("override ") and "/" not in group:
                keys.add(group)
    return frozenset(keys | _EXTRA_TOP_LEVEL)


def _dataset_path(cfg: DictConfig, key: str = "dataset.path") -> Path | None:
    present, path = select(cfg, key)
    if not present or path is None:
        return None
    from hydra.core.hydra_config import HydraConfig

    # Relative paths mean the launch directory, as the loaders read them.
    if HydraConfig.initialized():
        from hydra.utils import to_absolute_path

        return Path(to_absolute_path(str(path)))
    return Path(os.path.abspath(str(path)))


def _output_dir(cfg: DictConfig) -> str | None:
    """The running job's output folder (Hydra's, else the one a saved config records), if any."""
    from hydra.core.hydra_config import HydraConfig

    if HydraConfig.initialized():
        return str(HydraConfig.get().runtime.output_dir)
    value = OmegaConf.select(cfg, "hydra.runtime.output_dir", default=None, throw_on_resolution_failure=False)
    return None if value is None else str(value)


def _sections(config_file: Path) -> dict[str, frozenset[str]]:
    """config.yaml's own mappings (``cache``, ``paths``, ...): their keys, for typos and ``cache=<string>``."""
    return _section_keys(str(config_file), Path(config_file).stat().st_mtime_ns)


@lru_cache(maxsize=8)
def _section_keys(config_file: str, mtime_ns: int) -> dict[str, frozenset[str]]:
    base = OmegaConf.load(config_file)
    return {
        str(k): frozenset(str(c) for c in v)
        for k, v in base.items()
        if k not in ("defaults", "hydra") and isinstance(v, DictConfig)
    }


@lru_cache(maxsize=64)
def _parameters(target: str) -> frozenset[str] | None:
    """The keyword parameters of a harness ``_target_`` (a class's ``__init__``, a dataclass's fields, a
    function), read from its source with :mod:`ast` so that nothing is imported; None when any key may be
    right (a ``**kwargs``, a base class defined elsewhere, a target outside the package or not found)."""
    module, _, name = target.rpartition(".")
    if not module.startswith("harness."):
        return None
    relative = Path(*module.split(".")[1:])
    for candidate in (PACKAGE_DIR / relative.with_suffix(".py"), PACKAGE_DIR / relative / "__init__.py"):
        if candidate.is_file():
            try:
                tree = ast.parse(candidate.read_text())
            except (OSError, SyntaxError):
                return None
            return _node_parameters(tree, name, set())
    return None


def _function_parameters(function: ast.FunctionDef | ast.AsyncFunctionDef) -> frozenset[str] | None:
    args = function.args
    if args.kwarg is not None:
        return None
    return frozenset(a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs] if a.arg not in ("self", "cls"))


def _node_parameters(tree: ast.Module, name: str, seen: set[str]) -> frozenset[str] | None:
    if name in seen:
        return None
    seen.add(name)
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name:
            return _function_parameters(node)
        if isinstance(node, ast.ClassDef) and node.name == name:
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and item.name == "__init__":
                    return _function_parameters(item)
            fields = frozenset(
                item.target.id
                for item in node.body
                if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name)
            )
            inherited: frozenset[str] = frozenset()
            for base in node.bases:
                if isinstance(base, ast.Name) and base.id in ("object", "Protocol", "ABC"):
                    continue
                if not isinstance(base, ast.Name):
                    return None
                from_base = _node_parameters(tree, base.id, seen)
                if from_base is None:
                    return None
                inherited |= from_base
            decorated = any("dataclass" in ast.unparse(d) for d in node.decorator_list)
            return fields | inherited if decorated or inherited else (None if fields else frozenset())
    return None


def _task_overrides(cfg: DictConfig, overrides: list[str] | None) -> list[str]:
    if overrides is not None:
        return overrides
    hydra_node = cfg.get("hydra") if isinstance(cfg, DictConfig) else None
    if isinstance(hydra_node, DictConfig):
        return [str(o) for o in OmegaConf.select(hydra_node, "overrides.task", default=[]) or []]
    from hydra.core.hydra_config import HydraConfig

    if HydraConfig.initialized():
        return [str(o) for o in HydraConfig.get().overrides.task]
    return []


def _added_key_problems(cfg: DictConfig, overrides: list[str], groups: set[str]) -> list[str]:
    """A key added with ``+`` under one of the harness's groups or sections (``+cache.netwrok_fs=refuse``):
    ``+`` adds only keys the config files lack, so the key is a typo unless the ``_target_`` it configures
    takes it as a parameter (``+retriever.encoder.show_progress=false``) or it lies inside a value such a
    parameter holds (a mapping of keyword arguments)."""
    found = []
    for override in overrides:
        if not override.startswith("+") or override.startswith("++") or "=" not in override:
            continue
        key = override[1:].split("=", 1)[0].strip()
        parts = key.split(".")
        if len(parts) < 2 or parts[0] not in groups or "@" in key:
            continue
        parent_key, name = ".".join(parts[:-1]), parts[-1]
        try:
            present, parent = select(cfg, parent_key)
        except OmegaConfBaseException:
            continue
        if not present or not isinstance(parent, DictConfig):
            continue
        target = parent.get("_target_") if "_target_" in parent else None
        if target is None:
            # Inside a target's parameter (a mapping of keyword arguments): anything goes.
            if any(
                isinstance(node, DictConfig) and "_target_" in node
                for node in (select(cfg, ".".join(parts[:i]))[1] for i in range(1, len(parts) - 1))
            ):
                continue
            known = [str(k) for k in parent if str(k) != name]
        else:
            parameters = _parameters(str(target))
            if parameters is None or name in parameters:
                continue
            known = sorted(parameters | {str(k) for k in parent if str(k) != name})
        found.append(
            f"unknown key {key!r} (added with +); allowed keys under {parent_key}: {', '.join(sorted(known))}"
            + closest(name, known, parent_key + ".")
        )
    return found


def _section_problems(cfg: DictConfig, config_file: Path) -> list[str]:
    found = []
    for section, keys in _sections(config_file).items():
        if section not in cfg:
            continue
        value = OmegaConf.select(cfg, section, throw_on_resolution_failure=False)
        if not isinstance(value, DictConfig):
            shown = redacted(value) if isinstance(value, str) else value
            found.append(
                f"{section}={shown!r} is not a mapping; allowed: the keys {', '.join(sorted(keys))} "
                f"(set one with {section}.KEY=VALUE)"
            )
    return found


def problems(cfg: DictConfig, config_file: Path = CONFIG_FILE, overrides: list[str] | None = None) -> list[str]:
    """Every invalid value of ``cfg``, one line each; empty when the config is valid. ``overrides``: the
    command line's (for keys added with ``+``); by default ``cfg.hydra.overrides.task`` or the running job's."""
    found: list[str] = version_problems()
    allowed = allowed_top_level_keys(config_file)
    found += _section_problems(cfg, config_file)
    found += _added_key_problems(cfg, _task_overrides(cfg, overrides), allowed - _EXTRA_TOP_LEVEL)
    for key in cfg:
        if str(key) not in allowed:
            value = OmegaConf.select(cfg, str(key), throw_on_resolution_failure=False)
            found.append(f"unknown top-level key {key!r} (value {value!r}); allowed keys: {', '.join(sorted(allowed))}")
    for rule in RULES:
        try:
            present, value = select(cfg, rule.key)
        except OmegaConfBaseException as error:  # an interpolation that does not resolve
            found.append(f"{rule.key}: cannot be resolved ({error}); allowed: {rule.allowed}")
            continue
        if not present or (value is None and rule.nullable):
            continue
        if not rule.ok(value):
            shown = redacted(value) if isinstance(value, str) else value
            found.append(f"{rule.key}={shown!r} is out of range; allowed: {rule.allowed}")
    try:
        url = OmegaConf.select(cfg, "cache.url", default=None)
    except OmegaConfBaseException:
        url = None
    if is_url(url):
        found += url_problems(str(url))
    found += retriever_problems(cfg)
    found += reader_class_problems(cfg)
    found += vllm_problems(cfg)
    found += server_url_problems(cfg)
    found += kernels_problems(cfg)
    if not found:  # where it would compute, once its values are known to be valid
        found += device_problems(cfg)
        found += cpu_problems(cfg)
    path = _dataset_path(cfg)
    if path is not None and not path.exists():
        found.append(
            f"dataset.path={str(select(cfg, 'dataset.path')[1])!r} does not exist (looked for {path}); "
            f"{fetch_hint(path, OmegaConf.select(cfg, 'paths.data_dir', default=None))}"
            "allowed: an existing file or folder, or null for the packaged demo set"
        )
    aliases = _dataset_path(cfg, "dataset.aliases")
    if aliases is not None and not aliases.is_file():
        found.append(
            f"dataset.aliases={str(select(cfg, 'dataset.aliases')[1])!r} does not exist (looked for {aliases}); "
            "allowed: 2WikiMultihopQA's id_aliases.json, or null"
        )
    found += secret_folder_problems(_output_dir(cfg))
    if not found:  # the files, once the values that say how to read them are valid
        from harness.run.dataset_check import dataset_problems

        found += dataset_problems(cfg, Path(config_file).parent)
        found += [] if found else empty_corpus_problems(cfg)
    return found


def validate(cfg: DictConfig, config_file: Path = CONFIG_FILE, overrides: list[str] | None = None) -> None:
    """Raise :class:`ConfigError` listing every invalid value of ``cfg``."""
    found = problems(cfg, config_file, overrides)
    if found:
        raise ConfigError(found)
