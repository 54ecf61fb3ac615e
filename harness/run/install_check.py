"""Checks of what is installed, before any model loads: the libraries the readers compute with at or above the
floors in pyproject.toml, and hub kernels asked for offline only when they are in the local cache.

Each floor is a version the test suite passed on. Below one the failure comes late and says little: transformers
5.17 accepts the keyword the row decoder passes its key cache under and ignores it, and row decoding then stops on
a bare ``AssertionError``. Here it is one line naming the package, the version found and the floor (exit 2).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from functools import cache, lru_cache
from importlib import metadata
from pathlib import Path

from omegaconf import DictConfig, OmegaConf
from packaging.requirements import Requirement
from packaging.version import Version

# The libraries whose version changes what a reader computes or whether it loads.
FLOOR_PACKAGES = ("torch", "transformers", "accelerate", "bitsandbytes", "pytorch-lightning", "lightning-fabric")
KERNELS_REPO_PREFIX = "models--kernels-community--"


PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"


@lru_cache(maxsize=1)
def declared_floors() -> dict[str, Requirement]:
    """The harness's own requirement of each package in :data:`FLOOR_PACKAGES`: from its installed metadata, or
    from pyproject.toml when the source tree runs uninstalled (on ``PYTHONPATH``, as on a lent GPU node)."""
    try:
        declared = metadata.requires("harness") or []
    except metadata.PackageNotFoundError:
        try:
            import tomllib  # pyright: ignore[reportMissingImports]  (Python 3.11+)
        except ImportError:  # Python 3.10, uninstalled: nothing to compare with
            return {}
        declared = tomllib.loads(PYPROJECT.read_text())["project"]["dependencies"]
    requirements = [Requirement(line) for line in declared]
    return {r.name.lower(): r for r in requirements if r.name.lower() in FLOOR_PACKAGES and r.marker is None}


@cache  # what is installed does not change while a process runs its sweep's jobs
def installed_version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def version_problems(installed: Mapping[str, str | None] | None = None) -> list[str]:
    """One line per package whose installed version the harness's requirement does not admit."""
    found = []
    for name, requirement in declared_floors().items():
        version = installed[name] if installed is not None and name in installed else installed_version(name)
        if version is None:
            found.append(f"{name} is not installed; the harness needs {requirement} (`make setup` installs it)")
            continue
        # A local build label (2.13.0+cu130) is the same release as far as the floor goes.
        if not requirement.specifier.contains(Version(version).public, prereleases=True):
            tested = "the version" if str(requirement.specifier).startswith("==") else "the oldest version"
            found.append(
                f"{name} {version} is installed; the harness needs {requirement} ({tested} its tests passed on): "
                "`make setup` installs it"
            )
    return found


def _hub_offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on")


def cached_kernel_repos(cache: Path | None = None) -> list[str]:
    """The ``kernels-community`` repositories in the local hub cache."""
    if cache is None:
        from huggingface_hub import constants

        cache = Path(constants.HF_HUB_CACHE)
    if not cache.is_dir():
        return []
    return sorted(p.name[len(KERNELS_REPO_PREFIX) :] for p in cache.glob(KERNELS_REPO_PREFIX + "*"))


def kernels_problems(cfg: DictConfig, cache: Path | None = None) -> list[str]:
    """``reader.kernels: true`` with the hub offline and no hub kernel in the local cache would fail at load."""
    reader = cfg.get("reader")
    if not isinstance(reader, DictConfig):
        return []
    if (
        OmegaConf.select(reader, "kernels", default=None) is not True
        or not _hub_offline()
        or cached_kernel_repos(cache)
    ):
        return []
    return [
        "reader.kernels=true asks for transformers' hub kernels (kernels-community/...), but the hub is offline "
        "(HF_HUB_OFFLINE=1) and none is in the local hub cache; set reader.kernels=false, or load once with the "
        "hub reachable so that they are cached"
    ]
