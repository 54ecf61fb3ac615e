"""Where a model's ``config.json`` is found without downloading anything.

A plan needs the architecture only, so the ladder's configs are packaged in ``model_configs/`` as
``<org>__<name>.json`` (the published files; ``auto_map`` is left out, as transformers has every ladder
architecture natively). Anything else is read from a local folder or the local Hugging Face hub cache.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from harness.backends.offline_models import DEFAULT_MODELS_DIR, OFFLINE_MODELS, default_folder

PACKAGED_DIR = Path(__file__).resolve().parent / "model_configs"


def packaged_config_path(hub_id: str) -> Path | None:
    path = PACKAGED_DIR / f"{hub_id.replace('/', '__')}.json"
    return path if path.is_file() else None


def packaged_hub_ids() -> list[str]:
    return sorted(p.stem.replace("__", "/", 1) for p in PACKAGED_DIR.glob("*.json"))


def hub_cache_dirs() -> list[Path]:
    """The hub caches huggingface_hub would read, most specific setting first."""
    dirs = [os.environ.get(name) for name in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE")]
    if os.environ.get("HF_HOME"):
        dirs.append(str(Path(os.environ["HF_HOME"]) / "hub"))
    dirs.append(str(Path("~/.cache/huggingface/hub").expanduser()))
    seen: list[Path] = []
    for d in dirs:
        if d and Path(d) not in seen:
            seen.append(Path(d))
    return seen


def cached_hub_config(hub_id: str) -> Path | None:
    """``config.json`` of ``hub_id`` in the local hub cache: the revision ``refs/main`` names, else the newest."""
    org_name = hub_id.replace("/", "--")
    for cache in hub_cache_dirs():
        repo = cache / f"models--{org_name}"
        main = repo / "refs" / "main"
        if main.is_file():
            path = repo / "snapshots" / main.read_text().strip() / "config.json"
            if path.is_file():
                return path
        snapshots = sorted((repo / "snapshots").glob("*/config.json"), key=lambda p: p.stat().st_mtime, reverse=True)
        if snapshots:
            return snapshots[0]
    return None


def _looks_like_hub_id(text: str) -> bool:
    parts = text.split("/")
    return len(parts) == 2 and all(parts) and not text.startswith((".", "~"))


def model_config_path(pretrained: str) -> Path | None:
    """The ``config.json`` for a local folder (or a ``.json`` file), else for a hub id: the packaged copy,
    then the local hub cache; None when none is found."""
    path = Path(str(pretrained)).expanduser()
    if path.is_dir():
        return path / "config.json" if (path / "config.json").is_file() else None
    if path.is_file() and path.suffix == ".json":
        return path
    if _looks_like_hub_id(str(pretrained)):
        return packaged_config_path(str(pretrained)) or cached_hub_config(str(pretrained))
    return None


def reader_source(reader: Mapping[str, Any]) -> str:
    """What a reader config loads: ``pretrained``, or an offline model's folder under ``models_dir``."""
    pretrained = reader.get("pretrained")
    offline = reader.get("offline_model")
    if pretrained:
        return str(pretrained)
    if offline:
        return str(default_folder(str(offline), reader.get("models_dir") or DEFAULT_MODELS_DIR))
    raise ValueError(
        "the reader config names no model: set reader.pretrained (hub id or folder) or reader.offline_model"
    )


def reader_config_path(reader: Mapping[str, Any]) -> Path:
    """The reader's ``config.json``, or a FileNotFoundError that says where it was looked for."""
    source = reader_source(reader)
    path = model_config_path(source)
    if path is not None:
        return path
    offline = reader.get("offline_model")
    if offline and offline in OFFLINE_MODELS:
        hint = f"convert it first: python -m harness.backends.offline_models --name {offline} --folder {source}"
    else:
        hint = (
            f"not a local folder, not packaged in {PACKAGED_DIR.relative_to(PACKAGED_DIR.parents[2])}/ and not in "
            f"the Hugging Face cache ({', '.join(str(d) for d in hub_cache_dirs())}); "
            "point reader.pretrained at a folder holding its config.json"
        )
    raise FileNotFoundError(f"no config.json for {source!r}: {hint}")
