"""Files under version control are not overwritten by a report unless asked (``--force``).

A report written over a tracked page (docs/replication.md, its figures) would replace the published figures
with whatever the local runs hold; the default outputs therefore live under ``outputs/``, and a target that
git tracks needs ``--force``. Outside a git checkout, or without git, nothing is tracked.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterable
from pathlib import Path


def tracked_files(path: Path) -> list[str]:
    """The files git tracks at ``path`` (a file, or every file below a folder); none outside a checkout."""
    git = shutil.which("git")
    folder = path if path.is_dir() else path.parent
    if git is None or not folder.is_dir():
        return []
    # Run inside the folder: the checkout is the one holding the target, wherever the command was started.
    done = subprocess.run(
        [git, "ls-files", "-z", "--", path.resolve().as_posix()],
        cwd=folder,
        capture_output=True,
        text=True,
        check=False,
    )
    return [name for name in done.stdout.split("\0") if name] if done.returncode == 0 else []


def refuse_tracked(targets: Iterable[Path], force: bool) -> None:
    """Raise FileExistsError naming the tracked files among ``targets`` (files or folders), unless ``force``."""
    if force:
        return
    tracked = [str(target) for target in targets if tracked_files(target)]
    if tracked:
        raise FileExistsError(
            f"{', '.join(tracked)} holds files under version control; give --force to overwrite them, "
            "or --out elsewhere"
        )
