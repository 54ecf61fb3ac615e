"""Run the harness command line from a frozen copy of the code, in a subprocess.

Cache and run keys fingerprint the source, so a run and its relaunch must see the same source even while
the working tree changes between them.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO, with_tiny_reader


def freeze(root: Path) -> Path:
    for part in ("harness", "conf", "sweeps"):
        shutil.copytree(REPO / part, root / part, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    return root


def harness_env(cache_dir: Path) -> dict[str, str]:
    return {
        **os.environ,
        "HARNESS_CACHE_DIR": str(cache_dir),
        "HARNESS_MODELS_DIR": str(REPO / ".cache" / "models"),
        "WANDB_MODE": "disabled",
    }


def popen(code: Path, args: list[str], cache_dir: Path, cwd: Path | None = None) -> subprocess.Popen:
    """``python -m harness ARGS``; with ``cwd`` unset the frozen copy is the working directory, and
    `python -m` puts the working directory first on sys.path, so the copy is the code that runs."""
    env = harness_env(cache_dir)
    args = args if "--help" in args else with_tiny_reader(args)
    if cwd is not None:
        env["PYTHONPATH"] = str(code)
    return subprocess.Popen(
        [sys.executable, "-m", "harness", *args],
        cwd=cwd or code,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )


def run(code: Path, args: list[str], cache_dir: Path, timeout: float = 900, cwd: Path | None = None):
    proc = popen(code, args, cache_dir, cwd)
    out, _ = proc.communicate(timeout=timeout)
    return proc.returncode, out
