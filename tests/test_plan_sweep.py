"""`python -m harness.plan --sweep` lists a 6-job multirun as the basic sweeper would launch it, each job with
its overrides, the launcher's resources, its reader's memory plan and a cost from the measured rates, and
starts nothing: no sweep folder, no cache. Every rate it prices with is a figure its page still shows beside
the command that measured it."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time

import pytest

from harness.plan.rates import JOB, READ_RATES, SELECTION
from harness.run.preview_launch import cache_line
from tests.conftest import REPO, compose_cfg

PACKERS = ("packed", "submod")
BUDGETS = ("96", "128", "160")
DEMO_QUESTIONS = 12


def preview(tmp_path, *arguments: str) -> tuple[subprocess.CompletedProcess, list[str]]:
    env = {**os.environ, "HARNESS_CACHE_DIR": str(tmp_path / "cache")}
    sweep = [f"packer={','.join(PACKERS)}", f"budget={','.join(BUDGETS)}", f"hydra.sweep.dir={tmp_path / 'sweep'}"]
    result = subprocess.run(
        [sys.executable, "-m", "harness.plan", "--sweep", *sweep, *arguments],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    # No sweep folder, and in the cache folder nothing but the plan's own parameter counts (no embeddings,
    # pools or reader answers: no stage ran).
    assert not (tmp_path / "sweep").exists(), "the preview wrote the sweep's folder"
    written = {p.relative_to(tmp_path / "cache").parts[0] for p in (tmp_path / "cache").rglob("*") if p.is_file()}
    assert written <= {"plan"}, written
    return result, result.stdout.splitlines()


def jobs(lines: list[str]) -> list[tuple[str, list[str]]]:
    """(overrides, the job's indented lines) per job, in order."""
    found = []
    for index, line in enumerate(lines):
        match = re.match(r"job (\d+): (.*)", line)
        if match:
            assert int(match.group(1)) == len(found)
            found.append((match.group(2), lines[index + 1 : index + 4]))
    return found


def expected_overrides(*fixed: str) -> list[str]:
    # The basic sweeper crosses the task overrides in order, the last list fastest; hydra.* ones are not a job's.
    return [" ".join([f"packer={p}", f"budget={b}", *fixed]) for p in PACKERS for b in BUDGETS]


def seconds(read_per_question: float) -> float:
    return DEMO_QUESTIONS / 75.9 + 0.89 + DEMO_QUESTIONS * read_per_question


@pytest.mark.usefixtures("cache_with_shared_plan")
@pytest.mark.process
def test_a_cpu_sweep_on_the_basic_launcher(tmp_path):
    result, lines = preview(tmp_path, "reader=smollm2_135m")
    assert result.returncode == 0, result.stderr[-2000:]
    assert lines[0].startswith("6 jobs; none started.")
    found = jobs(lines)
    cpus = len(os.sched_getaffinity(0))
    assert [overrides for overrides, _ in found] == expected_overrides("reader=smollm2_135m")  # hydra.* apart
    for _, (resources, memory, cost) in found:
        assert resources == f"  resources  {cpus} CPUs, 0 GPUs (none on this machine; --gpus names a node's)"
        assert memory == "  memory     reader smollm2-135m on the CPU: no GPU plan"
        # 12 demo questions at 3.71 s each (SmolLM2-135M on the CPU), 75.9 packings/s, 0.89 s per job.
        assert cost.startswith(
            f"  cost       {seconds(3.71):.1f} s = select 0.2 s [another machine] + job 0.89 s [another machine] + "
            "read 44.5 s [another machine: smollm2-135m: 3.71 s/question"
        )  # no job of this machine recorded in this cache: the documented rates, said to be another machine's
        assert cost.endswith("for 12 questions")
    assert f"{6 * seconds(3.71) / 60:.1f} job-minutes" in lines[-3] and lines[-3].startswith("total: ")


@pytest.mark.usefixtures("cache_with_shared_plan")
@pytest.mark.process
def test_a_gpu_sweep_through_slurm_plans_each_job_on_the_gpus_it_gets(tmp_path):
    result, lines = preview(tmp_path, "reader=qwen2.5_7b_nf4", "hydra/launcher=slurm", "--gpus", "24GiB")
    assert result.returncode == 0, result.stderr[-2000:]
    assert lines[0] == (
        "6 jobs; none started. Each gets 8 CPUs, 1 GPU; 32 at once (hydra/launcher=slurm, 64 GB memory, 240 min limit)."
    )
    found = jobs(lines)
    assert len(found) == 6
    for _, (resources, memory, cost) in found:
        assert resources == "  resources  8 CPUs, 1 GPU"
        assert memory.startswith("  memory     device_map auto over 1 x 24 GiB, fullest GPU ")
        assert memory.endswith("nf4 (bfloat16 compute)")
        assert cost.startswith(f"  cost       {seconds(1 / 5.50):.1f} s = ")
        assert "qwen2.5-7b-nf4: 5.50 prompts/s" in cost


@pytest.mark.usefixtures("cache_with_shared_plan")
@pytest.mark.process
def test_a_job_that_does_not_fit_makes_the_preview_exit_2(tmp_path):
    result, lines = preview(tmp_path, "reader=qwen2.5_7b", "reader.batch_size=256", "--gpus", "24GiB")
    assert result.returncode == 2
    assert sum("does not fit: reader=qwen2.5-7b" in line for line in lines) == 6


@pytest.mark.parametrize("rate", [*READ_RATES, SELECTION, JOB], ids=lambda r: r.name)
def test_every_rate_is_a_figure_its_page_shows_with_its_command(rate):
    page = (REPO / rate.page).read_text()
    assert rate.command in page
    assert re.search(rf"(?<![\d.]){re.escape(rate.figure)}(?![\d])", page), f"{rate.figure} not on {rate.page}"


@pytest.mark.usefixtures("cache_with_shared_plan")
@pytest.mark.process
def test_the_preview_shows_the_launcher_block_the_cache_and_what_a_sweeps_file_fixes(tmp_path):
    result, lines = preview(
        tmp_path,
        "read=false",
        "+sweeps=replication_packing",
        "hydra/launcher=slurm",
        "+hydra.launcher.setup=[module load cuda/12.4,source .venv/bin/activate]",
        "cache.url=postgresql://harness:s3cret@db.internal/harness",
    )
    assert result.returncode == 0, result.stderr[-2000:]
    text = "\n".join(lines)
    start = lines.index("launcher   hydra/launcher=slurm")
    cache = "cache      PostgreSQL postgresql://harness:***@db.internal/harness (one cache for every host)"
    block = lines[start + 1 : lines.index(cache)]
    assert "  cpus_per_task: 8" in block and "  - module load cuda/12.4" in block and "  setup:" in block
    assert "s3cret" not in text
    assert "sweeps     +sweeps=replication_packing (sweeps/replication_packing.yaml)" in lines
    assert "  groups   dataset=hotpotqa_fork_dev_subsampled diversifier=none logger=none" in lines
    assert "  sweeps   packer=packed,focused,mmr,submod,oracle budget=96,128,160,224 seed=42,13,7" in lines
    assert any(line.startswith("  fixes    dataset.sample_size=null") and " k=5 read=false" in line for line in lines)


@pytest.mark.process
def test_multirun_with_cfg_says_to_drop_m_or_preview():
    result = subprocess.run(
        [sys.executable, "-m", "harness", "-m", "packer=packed,submod", "--cfg", "hydra"],
        cwd=REPO, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert result.returncode == 2
    assert "Drop -m" in result.stderr and "python -m harness.preview packer=packed,submod" in result.stderr


@pytest.mark.usefixtures("cache_with_shared_plan")
@pytest.mark.slow
def test_a_sweep_previewed_after_it_ran_here_is_priced_from_its_runs_within_a_factor_of_1_5(tmp_path):
    env = {**os.environ, "HARNESS_CACHE_DIR": str(tmp_path / "cache")}
    sweep = ["packer=packed,submod", "budget=96,160", "dataset.sample_size=6", "reader=smollm2_135m", "logger=none"]
    sweep += ["reader.max_new_tokens=8"]  # what is priced is the sweep's time, whatever the answers' length
    started = time.perf_counter()
    ran = subprocess.run(
        [sys.executable, "-m", "harness", "-m", *sweep, f"hydra.sweep.dir={tmp_path / 'ran'}"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    measured = time.perf_counter() - started
    assert ran.returncode == 0, ran.stderr[-2000:]
    names = sorted(json.loads(p.read_text())["name"] for p in (tmp_path / "ran").glob("*/summary.json"))
    assert names == ["packer=packed budget=160", "packer=packed budget=96", "packer=submod budget=160",
                     "packer=submod budget=96"]  # fmt: skip
    result = subprocess.run(
        [sys.executable, "-m", "harness.plan", "--sweep", *sweep, f"hydra.sweep.dir={tmp_path / 'again'}"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-2000:]
    lines = result.stdout.splitlines()
    costs = [line for line in lines if line.startswith("  cost ")]
    assert len(costs) == 4 and all("[another machine" not in line for line in costs), costs
    assert all("select" in line and "read" in line and line.count("[this machine]") == 3 for line in costs)
    (total,) = [line for line in lines if line.startswith("total: ")]
    estimate = float(re.match(r"total: (\d+) s", total).group(1))
    assert "1 process start(s)" in total
    assert measured / 1.5 <= estimate <= measured * 1.5, (estimate, measured)
    assert any(line.startswith("rates [this machine]: 4 jobs recorded on ") for line in lines)


SETUP_URL = "postgresql://harness:s3cret@db.internal/harness"
FROM_SETUP = (
    "cache      PostgreSQL postgresql://harness:***@db.internal/harness "
    "(one cache for every host; HARNESS_CACHE_URL exported by hydra.launcher.setup)"
)


def test_the_cache_line_is_the_one_the_launchers_setup_exports(monkeypatch):
    monkeypatch.delenv("HARNESS_CACHE_URL", raising=False)
    slurm = ["hydra/launcher=slurm", "hydra.launcher.partition=gpu"]
    setup = f'+hydra.launcher.setup=["source .venv/bin/activate","export HARNESS_CACHE_URL={SETUP_URL}"]'
    assert cache_line(compose_cfg([*slurm, setup], return_hydra_config=True)) == FROM_SETUP
    # This shell's variable is not what the jobs get: their setup line exports another after it.
    monkeypatch.setenv("HARNESS_CACHE_URL", "postgresql://me@localhost/mine")
    assert cache_line(compose_cfg([*slurm, setup], return_hydra_config=True)) == FROM_SETUP
    quoted = "+hydra.launcher.setup=[\"X=1 && export 'HARNESS_CACHE_URL=" + SETUP_URL + "?sslmode=require'\"]"
    assert cache_line(compose_cfg([*slurm, quoted], return_hydra_config=True)) == FROM_SETUP.replace(
        "harness (", "harness?sslmode=require ("
    )
    # cache.url on the command line is what the jobs use: the setup's variable is named as replaced.
    given = compose_cfg([*slurm, setup, "cache.url=postgresql://u:other@db2/h"], return_hydra_config=True)
    assert cache_line(given) == (
        "cache      PostgreSQL postgresql://u:***@db2/h (one cache for every host; hydra.launcher.setup exports "
        "HARNESS_CACHE_URL, which cache.url replaces)"
    )
    monkeypatch.delenv("HARNESS_CACHE_URL")
    folder = '+hydra.launcher.setup=["export HARNESS_CACHE_DIR=/shared/cache"]'
    assert cache_line(compose_cfg([*slurm, folder], return_hydra_config=True)) == (
        "cache      SQLite files under /shared/cache (HARNESS_CACHE_DIR exported by hydra.launcher.setup, each host's)"
    )
    later = '+hydra.launcher.setup=["export HARNESS_CACHE_URL=$DB_URL"]'
    assert cache_line(compose_cfg([*slurm, later], return_hydra_config=True)) == (
        "cache      HARNESS_CACHE_URL=$DB_URL (HARNESS_CACHE_URL exported by hydra.launcher.setup; expanded in each "
        "job's shell)"
    )


@pytest.mark.usefixtures("cache_with_shared_plan")
@pytest.mark.process
def test_the_preview_shows_the_cache_the_setup_lines_export_without_its_password(tmp_path):
    setup = f'+hydra.launcher.setup=["source .venv/bin/activate","export HARNESS_CACHE_URL={SETUP_URL}"]'
    result, lines = preview(tmp_path, "read=false", "hydra/launcher=slurm", setup)
    assert result.returncode == 0, result.stderr[-2000:]
    assert FROM_SETUP in lines
    assert "  - export HARNESS_CACHE_URL=postgresql://harness:***@db.internal/harness" in lines  # the setup block
    assert "s3cret" not in result.stdout + result.stderr
