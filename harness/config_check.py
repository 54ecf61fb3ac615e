"""Checks of a composed config that run before any model or file is loaded.

A value out of range would otherwise surface only after the encoder and reader have loaded (tens of
seconds) or, worse, not at all. Every problem is reported on one line naming the key, the bad value and
what is allowed; the command line exits with status 2 for them.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, ListConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from harness.cache.network_fs import POLICIES
from harness.cache.postgres import is_url
from harness.metrics.answers import ANSWER_SCORERS
from harness.metrics.longform import DATASET_SCORERS

CONFIG_FILE = Path(__file__).resolve().parent.parent / "conf" / "config.yaml"

# Top-level keys that are not in config.yaml's body but are legitimately present in a composed config.
_EXTRA_TOP_LEVEL = {"hydra"}


class ConfigError(ValueError):
    """One or more config values are invalid; ``problems`` holds one line per value."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = list(problems)
        super().__init__("\n".join(self.problems))


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


@dataclass(frozen=True)
class Rule:
    key: str  # dotted key; the rule applies only when the key is present
    ok: Callable[[Any], bool]
    allowed: str  # the allowed range, in words
    nullable: bool = False


def _int_at_least(low: int) -> Callable[[Any], bool]:
    return lambda v: _is_int(v) and v >= low


def _closed(low: float, high: float) -> Callable[[Any], bool]:
    return lambda v: _is_number(v) and low <= v <= high


def _known_scorers(value: Any) -> bool:
    return isinstance(value, (list, ListConfig)) and all(name in DATASET_SCORERS for name in value)


RULES = [
    Rule("seed", _is_int, "an integer"),
    Rule("budget", _int_at_least(1), "an integer >= 1 (reader tokens)"),
    Rule("k", _int_at_least(1), "an integer >= 1"),
    Rule("read", lambda v: isinstance(v, bool), "true or false"),
    Rule("read_chunk", _int_at_least(1), "an integer >= 1"),
    Rule("dataset.sample_size", _int_at_least(1), "an integer >= 1, or null for every question", nullable=True),
    Rule(
        "dataset.scorers",
        _known_scorers,
        f"a list of dataset scorers ({', '.join(DATASET_SCORERS)}), or null",
        nullable=True,
    ),
    Rule(
        "dataset.answer_scorer",
        lambda v: v in ANSWER_SCORERS,
        f"one of {', '.join(ANSWER_SCORERS)} (the official script whose EM/F1 rule applies)",
    ),
    Rule("perturb.rho", _closed(0.0, 1.0), "a number in [0, 1]"),
    Rule("perturb.gold_share", _closed(0.0, 1.0), "a number in [0, 1]"),
    Rule("perturb.overlap", lambda v: _is_number(v) and 0.0 <= v < 1.0, "a number in [0, 1)"),
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


def _select(cfg: DictConfig, key: str) -> tuple[bool, Any]:
    node: Any = cfg
    for part in key.split("."):
        if not isinstance(node, DictConfig) or part not in node:
            return False, None
        node = node[part]
    return True, node


def _dataset_path(cfg: DictConfig, key: str = "dataset.path") -> Path | None:
    present, path = _select(cfg, key)
    if not present or path is None:
        return None
    from hydra.core.hydra_config import HydraConfig

    # Relative paths mean the launch directory, as the loaders read them.
    if HydraConfig.initialized():
        from hydra.utils import to_absolute_path

        return Path(to_absolute_path(str(path)))
    return Path(os.path.abspath(str(path)))


def problems(cfg: DictConfig, config_file: Path = CONFIG_FILE) -> list[str]:
    """Every invalid value of ``cfg``, one line each; empty when the config is valid."""
    found: list[str] = []
    allowed = allowed_top_level_keys(config_file)
    for key in cfg:
        if str(key) not in allowed:
            value = OmegaConf.select(cfg, str(key), throw_on_resolution_failure=False)
            found.append(f"unknown top-level key {key!r} (value {value!r}); allowed keys: {', '.join(sorted(allowed))}")
    for rule in RULES:
        try:
            present, value = _select(cfg, rule.key)
        except OmegaConfBaseException as error:  # an interpolation that does not resolve
            found.append(f"{rule.key}: cannot be resolved ({error}); allowed: {rule.allowed}")
            continue
        if not present or (value is None and rule.nullable):
            continue
        if not rule.ok(value):
            found.append(f"{rule.key}={value!r} is out of range; allowed: {rule.allowed}")
    path = _dataset_path(cfg)
    if path is not None and not path.exists():
        found.append(
            f"dataset.path={str(_select(cfg, 'dataset.path')[1])!r} does not exist (looked for {path}); "
            "allowed: an existing file or folder, or null for the packaged demo set"
        )
    aliases = _dataset_path(cfg, "dataset.aliases")
    if aliases is not None and not aliases.is_file():
        found.append(
            f"dataset.aliases={str(_select(cfg, 'dataset.aliases')[1])!r} does not exist (looked for {aliases}); "
            "allowed: 2WikiMultihopQA's id_aliases.json, or null"
        )
    return found


def validate(cfg: DictConfig, config_file: Path = CONFIG_FILE) -> None:
    """Raise :class:`ConfigError` listing every invalid value of ``cfg``."""
    found = problems(cfg, config_file)
    if found:
        raise ConfigError(found)
