"""The machine's cores for a test whose processes are meant to run side by side.

Each pytest-xdist worker keeps to its own share of the CPUs (``tests/conftest.py``), and the processes it starts
inherit that share. A test of two sweeps at once then runs them both on one core, taking twice as long as the
thing it checks; inside :func:`every_core` the processes it starts get the cores the suite began with, as they
would on a user's machine, and compete with the other worker's tests there."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

# The CPUs the test process had before the worker was pinned; set by tests/conftest.py.
SUITE_CPUS: set[int] = set(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else set()


@contextmanager
def every_core() -> Iterator[None]:
    """Processes started inside the block may run on every CPU the suite began with; the test process keeps its
    own share again afterwards (its threads were sized for that share)."""
    if not hasattr(os, "sched_setaffinity") or not SUITE_CPUS:
        yield
        return
    mine = os.sched_getaffinity(0)
    os.sched_setaffinity(0, SUITE_CPUS)
    try:
        yield
    finally:
        os.sched_setaffinity(0, mine)
