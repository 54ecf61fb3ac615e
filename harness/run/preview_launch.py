"""What a sweep preview shows before its jobs: the launcher block as composed (resources and ``setup`` lines),
the cache the jobs share (backend, URL with any password masked) and the keys a ``+sweeps`` file fixes.

With these a user never needs ``--cfg hydra`` on a multirun (which Hydra refuses with ``-m``) to see what will be
launched.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from omegaconf import DictConfig, OmegaConf

from harness.cache.postgres import redacted

SWEEPS_DIR = Path(__file__).resolve().parents[2] / "sweeps"


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
    return [f"launcher   hydra/launcher={choice}", *(f"  {line}" for line in text)]


def cache_line(master: DictConfig) -> str:
    url = OmegaConf.select(master, "cache.url", default=None, throw_on_resolution_failure=False)
    if url:
        return f"cache      PostgreSQL {redacted(str(url))} (one cache for every host)"
    folder = OmegaConf.select(master, "paths.cache_dir", default=None, throw_on_resolution_failure=False)
    return f"cache      SQLite files under {folder} (this host's)"


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
