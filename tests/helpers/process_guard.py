"""Keeps ``make test-quick`` honest: a test that starts a process (a harness command, a model engine, a server,
a database, a browser, a worker process) must say so with ``@pytest.mark.process`` (or ``slow``), so that the
quick loop, which leaves those out, never starts one. git's quick look-ups do not count.

Checked while a test is set up and run, not while it is torn down: a session's shared server is stopped after
the last test that happened to use it. Tests that use a shared server or browser fixture, or W&B (its service
process starts once per test process, in whichever test logs first), are marked by
:func:`mark_fixture_processes` since which of them starts it depends on the order they run in.
"""

from __future__ import annotations

import contextlib
import multiprocessing.process
import os
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest

MARKS = ("process", "slow")
FIXTURES = {"postgres_url", "chromium", "chromium_session"}  # each starts a server the first time it is used
FREE_COMMANDS = {"git"}

_unmarked: str | None = None  # the id of the running test when it carries neither mark


def _command(args: Any) -> list[str]:
    """Popen's ``args`` as words: a command string (or path), or a sequence of arguments."""
    if isinstance(args, (str, bytes, os.PathLike)):
        return os.fsdecode(args).split()
    return [os.fsdecode(arg) for arg in args]


def _check(what: str) -> None:
    if _unmarked is not None:
        raise RuntimeError(
            f"{_unmarked} starts a process ({what}) but is not marked @pytest.mark.process: "
            "mark it so that `make test-quick` leaves it out (tests/helpers/process_guard.py)"
        )


_popen_init = subprocess.Popen.__init__
_process_start = multiprocessing.process.BaseProcess.start


def _guarded_popen_init(self, args, *rest, **options):
    command = _command(args)
    if not command or os.path.basename(command[0]) not in FREE_COMMANDS:
        _check(" ".join(command[:3]))
    _popen_init(self, args, *rest, **options)


def _guarded_start(self):
    _check(f"multiprocessing {self.name}")
    return _process_start(self)


def install() -> None:
    subprocess.Popen.__init__ = _guarded_popen_init  # type: ignore[method-assign]
    multiprocessing.process.BaseProcess.start = _guarded_start  # type: ignore[method-assign]


def mark_fixture_processes(items: list[pytest.Item]) -> None:
    for item in items:
        uses_wandb = "wandb" in item.nodeid.split("::")[0] or "wandb" in item.name
        if FIXTURES & set(getattr(item, "fixturenames", ())) or uses_wandb:
            item.add_marker(pytest.mark.process)


@contextlib.contextmanager
def watching(item: pytest.Item) -> Iterator[None]:
    """One phase of ``item``: processes it starts are checked against its marks."""
    global _unmarked
    _unmarked = None if any(item.get_closest_marker(mark) for mark in MARKS) else item.nodeid
    try:
        yield
    finally:
        _unmarked = None
