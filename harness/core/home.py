"""Where the harness keeps its converted models and its caches when the environment names no folder.

`make setup` converts the offline models into ``.cache/models`` of the checkout it runs in. A run launched from
another folder (a project of one's own, docs/extending.md) must find them there, not look for them relative to
wherever it was started, so ``paths.models_dir`` and ``paths.cache_dir`` default to folders of the harness's own
install: the checkout that holds ``harness/`` (an editable install, or the source tree on ``PYTHONPATH``).
A wheel installed into site-packages has no checkout; there the folders stay relative to the launch folder.
``HARNESS_MODELS_DIR`` and ``HARNESS_CACHE_DIR`` override both. Datasets live likewise in the checkout's ``data``
folder (``paths.data_dir``, what ``python -m harness.data fetch`` fills), or in ``HARNESS_DATA_DIR``.
"""

from __future__ import annotations

import os
from pathlib import Path

MODELS_DIR_ENV = "HARNESS_MODELS_DIR"
CACHE_DIR_ENV = "HARNESS_CACHE_DIR"
DATA_DIR_ENV = "HARNESS_DATA_DIR"
MODELS_SUBDIR = ".cache/models"
CACHE_SUBDIR = ".cache/harness"
DATA_SUBDIR = "data"


def harness_home() -> Path:
    """The checkout the running ``harness`` package belongs to (the folder with its pyproject.toml), or the
    current directory for an install without one."""
    root = Path(__file__).resolve().parents[2]
    return root if (root / "pyproject.toml").is_file() and (root / "harness").is_dir() else Path.cwd()


def under_home(relative: str) -> str:
    """``relative`` inside :func:`harness_home`, as an absolute path (``${harness_home:.cache/models}``)."""
    return str(harness_home() / relative)


def default_models_dir() -> Path:
    """``paths.models_dir`` as conf/config.yaml resolves it: ``$HARNESS_MODELS_DIR``, else the install's."""
    return Path(os.environ.get(MODELS_DIR_ENV) or under_home(MODELS_SUBDIR))


def default_cache_dir() -> Path:
    """``paths.cache_dir`` as conf/config.yaml resolves it: ``$HARNESS_CACHE_DIR``, else the install's."""
    return Path(os.environ.get(CACHE_DIR_ENV) or under_home(CACHE_SUBDIR))


def default_data_dir() -> Path:
    """``paths.data_dir`` as conf/config.yaml resolves it: ``$HARNESS_DATA_DIR``, else the install's ``data``."""
    return Path(os.environ.get(DATA_DIR_ENV) or under_home(DATA_SUBDIR))


def register_resolver() -> None:
    """``${harness_home:REL}`` for the configs; registered when the package is imported."""
    from omegaconf import OmegaConf

    if not OmegaConf.has_resolver("harness_home"):
        OmegaConf.register_new_resolver("harness_home", under_home)


def models_dir_origin(models_dir: str | Path) -> str:
    """Where a models folder came from, for errors: a run that cannot find a model usually looks in the
    wrong folder, and the fix is a setting, not a new download."""
    where = Path(models_dir).resolve()
    if os.environ.get(MODELS_DIR_ENV):
        return f"models folder {where} (from {MODELS_DIR_ENV})"
    if where == Path(under_home(MODELS_SUBDIR)).resolve():
        return f"models folder {where} (the harness checkout's; `make setup` there fills it, or set {MODELS_DIR_ENV})"
    return f"models folder {where} (paths.models_dir; point it, or {MODELS_DIR_ENV}, at the folder `make setup` filled)"
