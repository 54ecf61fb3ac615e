"""How many CPU threads a generator uses when its config leaves it open (``n_threads``/``torch_threads``
null): the CPUs this process may run on (``os.sched_getaffinity``: a SLURM allocation or ``taskset``
narrow it), divided among the jobs a parallel launcher runs at once on this machine. An explicit value
in the config always wins.
"""

from __future__ import annotations

import logging
import os

log = logging.getLogger(__name__)

_parallel_jobs = 1  # jobs of this sweep running at once on this machine (set by the command line)
_logged: set[tuple[str, int]] = set()


def available_cpus() -> int:
    """CPUs this process may run on."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return max(1, os.cpu_count() or 1)


def set_parallel_jobs(jobs: int | None) -> None:
    """Jobs running at once beside this one (a joblib launcher's ``n_jobs``; <= 0 means one per CPU)."""
    global _parallel_jobs
    if jobs is None:
        _parallel_jobs = 1
    else:
        _parallel_jobs = available_cpus() if int(jobs) <= 0 else int(jobs)


def default_threads() -> int:
    """This job's share of the CPUs, at least one."""
    return max(1, available_cpus() // _parallel_jobs)


def resolve_threads(explicit: int | None, what: str) -> int:
    """``explicit`` when set, else :func:`default_threads` (logged once per user, so a run says what it used)."""
    if explicit is not None:
        return int(explicit)
    threads = default_threads()
    if (what, threads) not in _logged:
        _logged.add((what, threads))
        log.info(
            "%s: %d threads (%d CPUs available, %d parallel jobs)", what, threads, available_cpus(), _parallel_jobs
        )
    return threads
