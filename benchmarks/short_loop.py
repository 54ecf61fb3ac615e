"""The short loop's goals, measured on this machine in one command: the full suite on a fresh clone, and the
selection factorial's packings per second, each beside its goal, with the CPU they ran on.

Goals (for a 2-core AVX-512 CPU without AMX, the slowest kind the suite meets): `make test` under 12 minutes of
pytest on a fresh clone, no test over 60 s, no fewer tests passing than the 2,924 the goals were set against,
and at least 450 packings/s for the factorial with warm caches (`bench_factorial.py`).

    .venv/bin/python benchmarks/short_loop.py                  # clone HEAD beside this checkout; make test; factorial
    .venv/bin/python benchmarks/short_loop.py --skip-suite     # the factorial alone, in this checkout
    .venv/bin/python benchmarks/short_loop.py --checkout ../other-clone --skip-factorial

The clone (default: a folder beside this checkout, so the tests find the data samples where a checkout would)
measures the committed HEAD, with `make test` installing what it needs as on a fresh machine. The factorial
reads the IRCoT HotpotQA questions from `$HARNESS_DATA_DIR`, else the suite's sample links in the clone, else
the checkout's `data/` (`python -m harness.data fetch hotpotqa_fork_dev_subsampled`). The figures go to
`outputs/short_loop/<time>_<cpu kind>.json` and into a table; the exit status is 0 when every goal measured is
met. On another kind of CPU the table still prints, and says the goals are set for another kind.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from dataclasses import asdict, dataclass
from pathlib import Path

from rich.console import Console
from rich.table import Table

from harness.backends.precision import cpu_flags, cpu_kind, cpu_model
from harness.core.threads import available_cpus

REPO = Path(__file__).resolve().parents[1]
SUITE_MINUTES = 12.0
TEST_SECONDS = 60.0
MIN_PASSED = 2924  # the suite's passing tests when these goals were set: a faster suite may not have fewer
FACTORIAL_RATE = 450.0  # packings/s, warm caches
GOAL_CPU_KIND = "avx512_bf16 or avx512 (no AMX), 2 CPUs"
STUDY_FILE = Path("anlp-project-multihop/processed_data/hotpotqa/dev_subsampled.jsonl")  # as fetched
WARM_LINE = re.compile(r"^warm caches:\s+([\d.]+) s\s+([\d.]+) packings/s", re.MULTILINE)
# bench_factorial.py options that make another sweep than the goal's
SWEEP_OPTIONS = ("--dataset", "--questions", "--packers", "--budgets", "--seeds", "--launcher", "--reader")


@dataclass
class Machine:
    model: str
    cpus: int
    kind: str

    @property
    def is_goal_kind(self) -> bool:
        return self.kind in ("avx512_bf16", "avx512") and self.cpus == 2


@dataclass
class SuiteFigures:
    returncode: int
    pytest_s: float  # the pytest session's wall time (junit's testsuite time)
    summed_s: float  # the tests' own times added up
    tests: int
    passed: int
    skipped: int
    failed: int
    slowest_s: float
    slowest: str


@dataclass
class FactorialFigures:
    warm_s: float
    packings_per_s: float
    full: bool  # the whole 29,100-packing sweep the goal is set for, not a smaller one (--questions, ...)


def this_machine(cpuinfo: str | None = None) -> Machine:
    return Machine(model=cpu_model(cpuinfo), cpus=available_cpus(), kind=cpu_kind(cpu_flags(cpuinfo)))


def suite_figures(junit: Path, returncode: int) -> SuiteFigures:
    """The figures of one pytest session from its JUnit XML (pytest's own: one testsuite element)."""
    root = ET.parse(junit).getroot()
    suite = root if root.tag == "testsuite" else root.find("testsuite")
    if suite is None:
        raise ValueError(f"{junit}: no testsuite element")
    cases = [
        (float(case.get("time", 0.0)), f"{case.get('classname', '')}::{case.get('name', '')}")
        for case in suite.iter("testcase")
    ]
    tests, skipped = int(suite.get("tests", 0)), int(suite.get("skipped", 0))
    failed = int(suite.get("failures", 0)) + int(suite.get("errors", 0))
    slowest_s, slowest = max(cases, default=(0.0, ""))
    return SuiteFigures(
        returncode=returncode,
        pytest_s=float(suite.get("time", 0.0)),
        summed_s=round(sum(seconds for seconds, _ in cases), 1),
        tests=tests,
        passed=tests - skipped - failed,
        skipped=skipped,
        failed=failed,
        slowest_s=slowest_s,
        slowest=slowest,
    )


def factorial_figures(output: str, arguments: list[str]) -> FactorialFigures:
    """The warm sweep's figures from ``bench_factorial.py``'s printed lines, run with ``arguments``."""
    found = WARM_LINE.search(output)
    if found is None:
        raise ValueError(f"no 'warm caches:' line in the factorial's output:\n{output[-2000:]}")
    full = not any(a.split("=", 1)[0] in SWEEP_OPTIONS for a in arguments)
    return FactorialFigures(warm_s=float(found.group(1)), packings_per_s=float(found.group(2)), full=full)


def goals(suite: SuiteFigures | None, factorial: FactorialFigures | None) -> list[tuple[str, str, str, bool | None]]:
    """(goal, measured, target, met) for each goal that was measured; met is None where the measurement is not
    the one the goal is set for (a smaller factorial)."""
    rows: list[tuple[str, str, str, bool | None]] = []
    if suite is not None:
        minutes, seconds = divmod(round(suite.pytest_s), 60)
        slowest = f"{suite.slowest_s:.1f} s ({suite.slowest.rsplit('::', 1)[-1][:48]})"
        rows += [
            ("make test passes", f"exit status {suite.returncode}, {suite.failed} failed", "0", suite.returncode == 0),
            (
                "pytest wall time",
                f"{minutes} min {seconds} s",
                f"< {SUITE_MINUTES:g} min",
                suite.pytest_s < 60 * SUITE_MINUTES,
            ),
            ("slowest test", slowest, f"< {TEST_SECONDS:g} s", suite.slowest_s < TEST_SECONDS),
            (
                "tests passed",
                f"{suite.passed} ({suite.skipped} skipped)",
                f">= {MIN_PASSED}",
                suite.passed >= MIN_PASSED,
            ),
        ]
    if factorial is not None:
        rows.append(
            (
                "factorial, warm caches",
                f"{factorial.packings_per_s:.1f} packings/s ({factorial.warm_s:.1f} s)",
                f">= {FACTORIAL_RATE:g}/s" + ("" if factorial.full else " (the full sweep)"),
                factorial.packings_per_s >= FACTORIAL_RATE if factorial.full else None,
            )
        )
    return rows


def clone_head(target: Path) -> Path:
    if target.exists():
        shutil.rmtree(target)
    subprocess.run(["git", "clone", "--quiet", str(REPO), str(target)], check=True)
    dirty = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=no"], cwd=REPO, capture_output=True, text=True
    )
    if dirty.stdout.strip():
        print("note: this checkout has uncommitted changes; the clone measures the last commit", file=sys.stderr)
    return target


def run_suite(checkout: Path, pytest_args: str) -> SuiteFigures:
    junit = checkout / "build" / "short-loop-junit.xml"
    junit.parent.mkdir(parents=True, exist_ok=True)
    log = checkout / "build" / "short-loop-test.log"
    args = f"--junitxml={junit} --durations=10 {pytest_args}".strip()
    print(f"make test in {checkout} (log: {log})", flush=True)
    with log.open("w") as handle:
        done = subprocess.run(
            ["make", "test", f"PYTEST_ARGS={args}"], cwd=checkout, stdout=handle, stderr=subprocess.STDOUT
        )
    if not junit.exists():
        sys.exit(
            f"make test wrote no {junit} (exit status {done.returncode}); the end of {log}:\n{log.read_text()[-3000:]}"
        )
    return suite_figures(junit, done.returncode)


def data_dir_for(checkout: Path) -> Path | None:
    """Where the factorial's questions are: $HARNESS_DATA_DIR, the suite's sample links, or data/."""
    candidates = [Path(os.environ["HARNESS_DATA_DIR"])] if os.environ.get("HARNESS_DATA_DIR") else []
    candidates += [checkout / ".cache" / "test-data", checkout / "data", REPO / "data"]
    return next((folder for folder in candidates if (folder / STUDY_FILE).exists()), None)


def run_factorial(checkout: Path, factorial_args: str) -> FactorialFigures | None:
    data_dir = data_dir_for(checkout)
    if data_dir is None:
        print(
            f"factorial skipped: no {STUDY_FILE} in a data folder "
            "(python -m harness.data fetch hotpotqa_fork_dev_subsampled)",
            file=sys.stderr,
        )
        return None
    python = checkout / ".venv" / "bin" / "python"
    arguments = shlex.split(factorial_args)
    command = [str(python if python.exists() else sys.executable), "benchmarks/bench_factorial.py", *arguments]
    env = {**os.environ, "HARNESS_DATA_DIR": str(data_dir), "HF_HUB_OFFLINE": "1"}
    print(f"factorial in {checkout}: {shlex.join(command)} (data: {data_dir})", flush=True)
    done = subprocess.run(command, cwd=checkout, env=env, capture_output=True, text=True, check=False)
    print(done.stdout, end="", flush=True)
    if done.returncode != 0:
        sys.exit(f"the factorial failed (exit status {done.returncode}):\n{done.stderr[-3000:]}")
    return factorial_figures(done.stdout, arguments)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkout", type=Path, default=None, help="measure this checkout rather than a fresh clone")
    parser.add_argument("--clone-dir", type=Path, default=REPO.parent / f"{REPO.name}-short-loop")
    parser.add_argument("--skip-suite", action="store_true", help="the factorial alone (in this checkout)")
    parser.add_argument("--skip-factorial", action="store_true")
    parser.add_argument("--pytest-args", default="", help="more arguments for pytest (PYTEST_ARGS)")
    parser.add_argument(
        "--factorial-args", default="--cache-dir .cache/harness", help="arguments for bench_factorial.py"
    )
    parser.add_argument("--out", type=Path, default=None, help="the JSON record (default outputs/short_loop/)")
    args = parser.parse_args(argv)

    machine = this_machine()
    started = time.perf_counter()
    checkout = args.checkout or (REPO if args.skip_suite else None)
    if checkout is None:
        checkout = clone_head(args.clone_dir)
    suite = None if args.skip_suite else run_suite(checkout.resolve(), args.pytest_args)
    factorial = None if args.skip_factorial else run_factorial(checkout.resolve(), args.factorial_args)
    rows = goals(suite, factorial)

    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=checkout, capture_output=True, text=True
    ).stdout.strip()
    stamp = datetime.datetime.now().strftime("%Y-%m-%d_%H%M")
    out = args.out or REPO / "outputs" / "short_loop" / f"{stamp}_{machine.kind}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    record = {
        "machine": asdict(machine),
        "commit": commit,
        "checkout": str(checkout),
        "suite": None if suite is None else asdict(suite),
        "factorial": None if factorial is None else asdict(factorial),
        "goals": [{"goal": g, "measured": m, "target": t, "met": met} for g, m, t, met in rows],
        "seconds": round(time.perf_counter() - started, 1),
    }
    out.write_text(json.dumps(record, indent=2) + "\n")

    table = Table(title=f"{machine.model}, {machine.cpus} CPUs, kind {machine.kind}; commit {commit}")
    for column in ("goal", "measured", "target", "met"):
        table.add_column(column)
    for goal, measured, target, met in rows:
        table.add_row(goal, measured, target, {True: "yes", False: "[bold red]no[/]", None: "n/a"}[met])
    console = Console(width=None if sys.stdout.isatty() else 120)  # a log file keeps each row on one line
    console.print(table)
    if not machine.is_goal_kind:
        console.print(
            f"the goals are set for a CPU of kind {GOAL_CPU_KIND}; this one is {machine.kind}, {machine.cpus} CPUs"
        )
    console.print(f"record: {out}")
    return 0 if all(met is not False for *_, met in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
