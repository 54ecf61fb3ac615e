"""Which code a run is: the harness version, the checkout it was imported from, its commit and whether the
checkout has uncommitted changes. With two checkouts and one virtual environment, a run can import the other
checkout's code; the first line a run prints, its summary.json and its W&B config say which one ran.
"""

from __future__ import annotations

import subprocess
from functools import lru_cache
from pathlib import Path

from harness.core.version import VERSION


def _git(root: Path, *arguments: str) -> str | None:
    try:
        done = subprocess.run(["git", "-C", str(root), *arguments], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


@lru_cache(maxsize=1)
def code_identity() -> dict[str, str | bool | None]:
    """``{"version", "path", "commit", "dirty"}`` of the running harness; commit and dirty are None outside a
    git checkout (an installed wheel). Dirty counts changes to tracked files only."""
    root = Path(__file__).resolve().parents[2]  # the folder holding harness/
    commit = _git(root, "rev-parse", "HEAD") if (root / "pyproject.toml").is_file() else None
    status = _git(root, "status", "--porcelain", "--untracked-files=no") if commit else None
    return {
        "version": VERSION,
        "path": str(root),
        "commit": commit,
        "dirty": None if status is None else bool(status),
    }


def describe_code(identity: dict | None = None) -> str:
    """``harness 0.1.0 from /path at 5712c9a (uncommitted changes)``."""
    identity = identity or code_identity()
    where = f"harness {identity['version']} from {identity['path']}"
    if not identity.get("commit"):
        return f"{where} (not a git checkout)"
    return f"{where} at {str(identity['commit'])[:10]}" + (" (uncommitted changes)" if identity.get("dirty") else "")
