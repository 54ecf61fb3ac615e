"""A module fixture's files built once for the whole suite rather than once per pytest-xdist worker.

Work stealing hands the tail of a module to the other worker, which then rebuilt the module's fixtures: a
reading sweep for the viewer's tests was run twice in one suite (15 s each). Fixtures whose result is files
that the tests only read build them here instead: in a folder that the session's workers share, under a file
lock, the first worker to ask builds and the others reuse (or wait while it builds).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from filelock import FileLock

DONE = ".built"


def session_folder(tmp_path_factory: pytest.TempPathFactory, name: str) -> Path:
    """The path ``name`` in a folder every worker of this session sees (the workers' base folders' parent)."""
    base = tmp_path_factory.getbasetemp()
    return (base.parent if "PYTEST_XDIST_WORKER" in os.environ else base) / name


def built_once(tmp_path_factory: pytest.TempPathFactory, name: str, build: Callable[[Path], None]) -> Path:
    """The folder ``name``, filled by ``build(folder)`` in the first worker of this session to ask for it.

    ``build`` writes only into the folder; the tests read it. A build that failed part-way is started again by
    the next worker to ask (the folder is marked done only after ``build`` returns)."""
    folder = session_folder(tmp_path_factory, f"built-once-{name}")
    with FileLock(f"{folder}.lock"):
        if not (folder / DONE).exists():
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir(parents=True)
            build(folder)
            (folder / DONE).touch()
    return folder
