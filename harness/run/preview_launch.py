"""What a sweep preview shows before its jobs: the launcher block as composed (resources and ``setup`` lines),
the cache the jobs share (backend, URL with any password masked) and the keys a ``+sweeps`` file fixes.

The cache is the one the jobs will see: a ``setup`` line that exports ``HARNESS_CACHE_URL`` (or
``HARNESS_CACHE_DIR``) runs in each job's batch script before the harness, so it chooses the jobs' cache
whatever this shell has set, unless the command line gives ``cache.url`` (``paths.cache_dir``) itself.

With these a user never needs ``--cfg hydra`` on a multirun (which Hydra refuses with ``-m``) to see what will be
launched.
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

import yaml
from omegaconf import DictConfig, OmegaConf

from harness.cache.postgres import is_url, redacted
from harness.core.home import CACHE_DIR_ENV

SWEEPS_DIR = Path(__file__).resolve().parents[2] / "sweeps"
CACHE_URL_ENV = "HARNESS_CACHE_URL"
SETUP = "hydra.launcher.setup"
_SEPARATORS = frozenset({";", "&&", "||", "|", "&"})  # the words that end a shell statement


def launcher_block(master: DictConfig) -> list[str]:
    """``hydra.launcher`` as the launcher will read it, resolved, one YAML line each (indented)."""
    choice = OmegaConf.select(master, "hydra.runtime.choices.hydra/launcher", default="basic")
    try:
        launcher = OmegaConf.to_container(master.hydra.launcher, resolve=True)
    except Exception as error:  # noqa: BLE001 - an unresolvable value is itself what the user must see
        return [f"launcher   hydra/launcher={choice}: cannot be resolved here ({error})"]
    assert isinstance(launcher, dict)
    shown = {k: v for k, v in launcher.items() if v is not None or k == "setup"}  # unset options are noise
    text = yaml.safe_dump(shown, sort_keys=False, width=110).rstrip().splitlines()
    # A setup line may export a connection string with its password: shown masked.
    return [f"launcher   hydra/launcher={choice}", *(f"  {redacted(line)}" for line in text)]


def setup_exports(master: DictConfig) -> dict[str, str]:
    """The variables the launcher's ``setup`` lines export (``export NAME=VALUE``, or ``NAME=VALUE`` then
    ``export NAME``), the last value of each, as the shell reads the words (quotes removed, ``$`` kept)."""
    setup = OmegaConf.select(master, SETUP, default=None, throw_on_resolution_failure=False)
    lines = [setup] if isinstance(setup, str) else list(setup or [])
    assigned: dict[str, str] = {}
    exported: dict[str, str] = {}
    for line in lines:
        lexer = shlex.shlex(str(line), posix=True, punctuation_chars=";&|")
        lexer.whitespace_split = True
        try:
            words = list(lexer)
        except ValueError:  # an unclosed quote: the job's shell fails on it, nothing is exported
            continue
        command: str | None = None  # the statement's command word, once past its leading assignments
        for word in words:
            if word in _SEPARATORS:
                command = None
                continue
            name, equals, value = word.partition("=")
            if command is None and equals and name.isidentifier():
                assigned[name] = value
            elif command is None:
                command = word
            elif command == "export" and name.isidentifier():
                exported[name] = value if equals else assigned.get(name, "")
    return exported


def _raw(master: DictConfig, key: str) -> Any:
    """``key``'s value as written, interpolations unresolved."""
    parent, _, leaf = key.rpartition(".")
    node = OmegaConf.select(master, parent, default=None)
    return OmegaConf.to_container(node, resolve=False).get(leaf) if isinstance(node, DictConfig) else None


def _from_setup(master: DictConfig, key: str, variable: str) -> str | None:
    """The value ``setup`` exports for ``variable`` when ``key`` reads it (``${oc.env:VARIABLE,...}``): what
    the jobs will get. None when setup does not export it or the config does not read it."""
    raw = _raw(master, key)
    reads = isinstance(raw, str) and f"oc.env:{variable}" in raw.replace(" ", "")
    return setup_exports(master).get(variable) if reads else None


def cache_line(master: DictConfig) -> str:
    """The cache the jobs will share: the ``setup`` lines' ``HARNESS_CACHE_URL`` / ``HARNESS_CACHE_DIR`` where
    they export one, else the config as this shell resolves it; a password masked."""
    url = _from_setup(master, "cache.url", CACHE_URL_ENV)
    if url is not None:
        said = f"{CACHE_URL_ENV} exported by {SETUP}"
        if "$" in url:
            return f"cache      {CACHE_URL_ENV}={redacted(url)} ({said}; expanded in each job's shell)"
        if url and not is_url(url):
            return f"cache      {CACHE_URL_ENV}={redacted(url)} ({said}): not a postgresql:// URL, every job fails"
        if url:
            return f"cache      PostgreSQL {redacted(url)} (one cache for every host; {said})"
        return _sqlite_line(master, f"; {said} empty")
    url = OmegaConf.select(master, "cache.url", default=None, throw_on_resolution_failure=False)
    if url:
        ignored = f"; {SETUP} exports {CACHE_URL_ENV}, which cache.url replaces" if _ignored(master) else ""
        return f"cache      PostgreSQL {redacted(str(url))} (one cache for every host{ignored})"
    return _sqlite_line(master)


def _ignored(master: DictConfig) -> bool:
    return CACHE_URL_ENV in setup_exports(master)


def _sqlite_line(master: DictConfig, note: str = "") -> str:
    folder = _from_setup(master, "paths.cache_dir", CACHE_DIR_ENV)
    if folder:
        return f"cache      SQLite files under {folder} ({CACHE_DIR_ENV} exported by {SETUP}, each host's{note})"
    folder = OmegaConf.select(master, "paths.cache_dir", default=None, throw_on_resolution_failure=False)
    return f"cache      SQLite files under {folder} (this host's{note})"


def _flat(node: Any, prefix: str = "") -> list[str]:
    if isinstance(node, dict):
        return [line for key, value in node.items() for line in _flat(value, f"{prefix}{key}.")]
    shown = "null" if node is None else str(node).lower() if isinstance(node, bool) else node
    return [f"{prefix.rstrip('.')}={shown}"]


def sweep_file_lines(overrides: list[str]) -> list[str]:
    """Per ``+sweeps=NAME`` override: the groups and keys the file fixes and the grid it sweeps."""
    lines = []
    for override in overrides:
        key, _, name = override.partition("=")
        if key.lstrip("+") != "sweeps" or not (SWEEPS_DIR / f"{name}.yaml").is_file():
            continue
        raw = yaml.safe_load((SWEEPS_DIR / f"{name}.yaml").read_text()) or {}
        groups = [
            f"{str(k).removeprefix('override /')}={v}"
            for entry in raw.get("defaults") or []
            if isinstance(entry, dict)
            for k, v in entry.items()
        ]
        params = ((raw.get("hydra") or {}).get("sweeper") or {}).get("params") or {}
        fixed = _flat({k: v for k, v in raw.items() if k not in ("defaults", "hydra")})
        lines.append(f"sweeps     +sweeps={name} (sweeps/{name}.yaml)")
        if groups:
            lines.append(f"  groups   {' '.join(groups)}")
        if fixed:
            lines.append(f"  fixes    {' '.join(fixed)}")
        if params:
            lines.append(f"  sweeps   {' '.join(f'{k}={v}' for k, v in params.items())}")
    return lines
