"""benchmarks/short_loop.py: the suite's figures read from a real pytest session's JUnit file, the goals worked
out by hand at their edges, and the factorial half run end to end on a few questions."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from harness.backends.precision import cpu_flags, cpu_kind
from tests.conftest import REPO

sys.path.insert(0, str(REPO / "benchmarks"))
import short_loop  # noqa: E402

SESSION = """
import time
import pytest

def test_fast():
    pass

def test_sleeps():
    time.sleep(0.4)

@pytest.mark.skip(reason="on purpose")
def test_skipped():
    pass

def test_fails():
    assert 1 == 2
"""

ZEN4_CPUINFO = """processor\t: 0
vendor_id\t: AuthenticAMD
model name\t: AMD EPYC 9R14 96-Core Processor
flags\t\t: fpu sse2 avx avx2 avx512f avx512dq avx512bw avx512vl avx512_bf16 avx512_vnni
"""


@pytest.mark.process
def test_suite_figures_come_from_the_sessions_junit_file(tmp_path):
    (tmp_path / "test_session.py").write_text(SESSION)
    junit = tmp_path / "junit.xml"
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={junit}"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 1, done.stdout[-2000:]
    figures = short_loop.suite_figures(junit, done.returncode)
    assert (figures.tests, figures.passed, figures.skipped, figures.failed) == (4, 2, 1, 1)
    assert figures.slowest == "test_session::test_sleeps" and figures.slowest_s >= 0.4
    assert figures.pytest_s >= figures.slowest_s and figures.summed_s >= 0.4
    met = {goal: ok for goal, _, _, ok in short_loop.goals(figures, None)}
    assert met["make test passes"] is False and met["tests passed"] is False and met["slowest test"] is True


def suite(pytest_s: float, slowest_s: float = 30.0, passed: int = short_loop.MIN_PASSED) -> short_loop.SuiteFigures:
    return short_loop.SuiteFigures(0, pytest_s, 2 * pytest_s, passed + 1, passed, 1, 0, slowest_s, "t::slow")


def test_each_goal_is_met_below_its_edge_and_missed_at_it():
    def met(figures, factorial=None):
        return {goal: (measured, ok) for goal, measured, _, ok in short_loop.goals(figures, factorial)}

    below = met(suite(719.4, slowest_s=59.9), short_loop.FactorialFigures(64.7, 450.0, full=True))
    assert below["pytest wall time"] == ("11 min 59 s", True)
    assert below["slowest test"] == ("59.9 s (slow)", True)
    assert below["tests passed"] == ("2924 (1 skipped)", True)
    assert below["factorial, warm caches"] == ("450.0 packings/s (64.7 s)", True)
    at = met(suite(720.0, slowest_s=60.0, passed=2923), short_loop.FactorialFigures(65.0, 449.9, full=True))
    assert at["pytest wall time"] == ("12 min 0 s", False)
    assert [at[g][1] for g in ("slowest test", "tests passed", "factorial, warm caches")] == [False, False, False]
    # A smaller factorial is reported, not judged: the goal is set for the whole sweep.
    assert met(None, short_loop.FactorialFigures(5.0, 3.0, full=False))["factorial, warm caches"][1] is None


def test_the_machine_is_named_by_its_cpu_kind():
    zen4 = short_loop.this_machine(ZEN4_CPUINFO)
    assert (zen4.model, zen4.kind) == ("AMD EPYC 9R14 96-Core Processor", "avx512_bf16")
    assert short_loop.this_machine().kind == cpu_kind(cpu_flags())


@pytest.mark.slow
def test_the_factorial_half_runs_and_records_its_figures(tmp_path):
    out = tmp_path / "record.json"
    arguments = "--questions 2 --packers packed --budgets 96 --seeds 42,13"
    done = subprocess.run(
        [sys.executable, "benchmarks/short_loop.py", "--skip-suite", "--factorial-args", arguments, "--out", str(out)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=170,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    record = json.loads(out.read_text())
    factorial = record["factorial"]
    assert record["suite"] is None and factorial["full"] is False
    # 2 jobs x 2 questions in the warm sweep's seconds, as bench_factorial.py prints both: one decimal each, so
    # on a slow CPU (8.8 s, 0.45/s printed as 0.5) the rate may be off by half its last digit
    assert factorial["packings_per_s"] == pytest.approx(4 / factorial["warm_s"], rel=0.05, abs=0.051)
    assert [(g["goal"], g["met"]) for g in record["goals"]] == [("factorial, warm caches", None)]
    assert record["machine"]["kind"] == cpu_kind(cpu_flags()) and "factorial, warm caches" in done.stdout
