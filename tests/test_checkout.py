"""A run says which code it is: version, checkout path, commit and uncommitted changes."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from harness.core.checkout import code_identity, describe_code
from tests.conftest import REPO


def head() -> str | None:
    """This tree's commit, or None when it is not a git checkout (a tree exported without .git)."""
    done = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True)
    return done.stdout.strip() if done.returncode == 0 else None


def where() -> str:
    """How the first line of a run ends for this tree."""
    commit = head()
    return f"from {REPO} at {commit[:10]}" if commit else f"from {REPO} (not a git checkout)"


def test_the_identity_is_this_checkout_at_its_commit():
    identity = code_identity()
    assert identity["path"] == str(REPO) and identity["commit"] == head()
    if head() is None:
        assert identity["dirty"] is None and describe_code(identity).endswith("(not a git checkout)")
        return
    tracked_changes = subprocess.run(
        ["git", "-C", str(REPO), "status", "--porcelain", "--untracked-files=no"], capture_output=True, text=True
    ).stdout.strip()
    assert identity["dirty"] is bool(tracked_changes)
    line = describe_code(identity)
    assert line.startswith(f"harness {identity['version']} {where()}")
    assert line.endswith("(uncommitted changes)") is bool(tracked_changes)


def test_outside_a_checkout_it_says_so():
    assert describe_code({"version": "1.0", "path": "/site-packages", "commit": None, "dirty": None}) == (
        "harness 1.0 from /site-packages (not a git checkout)"
    )


@pytest.mark.slow
def test_a_run_prints_its_commit_first_and_keeps_it_in_its_summary(tmp_path):
    env = {**os.environ, "HARNESS_CACHE_DIR": str(tmp_path / "cache")}
    done = subprocess.run(
        [sys.executable, "-m", "harness", "read=false", "logger=none", f"hydra.run.dir={tmp_path / 'run'}"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=240,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.splitlines()[0].startswith(f"harness {code_identity()['version']} {where()}")
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["code"]["commit"] == head() and summary["code"]["path"] == str(REPO)
