"""Generators left to choose their thread count take this job's share of the CPUs they may run on."""

from __future__ import annotations

import os

import pytest

from harness.backends.llama_cpp import LlamaCppSettings
from harness.core import threads


@pytest.fixture(autouse=True)
def one_job():
    threads.set_parallel_jobs(None)
    yield
    threads.set_parallel_jobs(None)


def test_default_is_the_affinity_set():
    assert threads.available_cpus() == len(os.sched_getaffinity(0))
    assert threads.default_threads() == threads.available_cpus()


def test_parallel_jobs_divide_the_cpus(monkeypatch):
    monkeypatch.setattr(threads, "available_cpus", lambda: 16)
    threads.set_parallel_jobs(4)
    assert threads.default_threads() == 4
    threads.set_parallel_jobs(3)
    assert threads.default_threads() == 5  # floor: never more threads than CPUs in all
    threads.set_parallel_jobs(-1)  # joblib's n_jobs=-1: one job per CPU
    assert threads.default_threads() == 1
    threads.set_parallel_jobs(32)  # more jobs than CPUs still gives each one thread
    assert threads.default_threads() == 1


def test_an_explicit_value_wins(monkeypatch):
    monkeypatch.setattr(threads, "available_cpus", lambda: 8)
    threads.set_parallel_jobs(2)
    assert threads.resolve_threads(None, "test") == 4
    assert threads.resolve_threads(1, "test") == 1


def test_llama_cpp_threads_default_to_null_and_validate():
    assert LlamaCppSettings().n_threads is None
    assert LlamaCppSettings.from_mapping({"n_threads": None}).n_threads is None
    assert LlamaCppSettings.from_mapping({"n_threads": 3}).n_threads == 3
    with pytest.raises(ValueError, match="n_threads"):
        LlamaCppSettings(n_threads=0)
