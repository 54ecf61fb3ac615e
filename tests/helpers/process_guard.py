"""Keeps ``make test-quick`` honest: a test that starts a process (a harness command, a model engine, a server,
a database, a browser, a worker process) must say so with ``@pytest.mark.process`` (or ``slow``), so that the
quick loop, which leaves those out, never starts one. git's quick look-ups do not count.

Checked while a test is set up and run, not while it is torn down: a session's shared server is stopped after
the last test that happened to use it. Tests that use a shared server or browser fixture, or W&B (its service
process starts once per test process, in whichever test logs first), are marked by
:func:`mark_fixture_processes` since which of them starts it depends on the order they run in.
"""

from __future__ import annotations

import multiprocessing.process
import os
import subprocess
from typing import Any

import pytest

MARKS = ("process", "slow")
FIXTURES = {"postgres_url", "chromium", "chromium_session"}  # each starts a server the first time it is used
FREE_COMMANDS = {"git"}

_unmarked: list[str] = []  # the id of the running test when it carries neither mark


def _command_name(args: Any) -> str:
    first = args.split()[0] if isinstance(args, str) and args.split() else (list(args)[0] if args else "")
    return os.path.basename(os.fspath(first))


def _check(what: str) -> None:
    if _unmarked:
        raise RuntimeError(
            f"{_unmarked[0]} starts a process ({what}) but is not marked @pytest.mark.process: "
            "mark it so that `make test-quick` leaves it out (tests/helpers/process_guard.py)"
        )


_popen_init = subprocess.Popen.__init__
_process_start = multiprocessing.process.BaseProcess.start


def _guarded_popen_init(self, args, *rest, **options):
    if _command_name(args) not in FREE_COMMANDS:
        _check(" ".join(map(str, [args] if isinstance(args, str) else list(args)[:3])))
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


def watching(item: pytest.Item):
    """A context for one phase of ``item``: processes it starts are checked against its marks."""

    class _Watch:
        def __enter__(self) -> None:
            if not any(item.get_closest_marker(mark) for mark in MARKS):
                _unmarked.append(item.nodeid)

        def __exit__(self, *exc: object) -> None:
            _unmarked.clear()

    return _Watch()
