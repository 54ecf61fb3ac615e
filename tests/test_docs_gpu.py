"""docs/gpu.md stays true: every `python -m harness` command of a recipe composes, passes the config check, and
on a simulated node of the size its block names (``# node: 4x24GiB``: a CUDA probe with those devices, and a
CUDA build of vLLM) meets no device, launcher or memory-plan problem; every `python -m harness.plan` and
`python -m harness.preview` line runs and exits 0 (a preview listing its jobs); every ``--cfg hydra --resolve``
line prints the GPUs the page says it does."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys

import pytest

from harness.core.devices import CudaProbe, Gpu
from harness.plan import parse_gpus
from harness.run.config_check import problems
from harness.run.device_check import device_problems
from tests.conftest import REPO, compose_cfg
from tests.helpers.doc_commands import command_lines, fenced_blocks, sweep_points

DOC = REPO / "docs" / "gpu.md"


def recipes() -> list[tuple[str, list[str]]]:
    """(node, overrides) of every harness command in a block that names its node."""
    found = []
    for block in fenced_blocks(DOC):
        node = re.search(r"^# node: (\S+)", block, flags=re.M)
        for line in block.splitlines():
            if line.startswith("python -m harness ") and node:
                found.append((node.group(1), shlex.split(line, comments=True)[3:]))
    return found


def plan_commands() -> list[tuple[str, list[str]]]:
    return [(c.module, c.arguments) for c in command_lines(DOC) if c.module in ("harness.plan", "harness.preview")]


def node(text: str) -> CudaProbe:
    specs = parse_gpus(text)
    gpus = tuple(Gpu(i, spec.name, spec.memory_bytes, (8, 0)) for i, spec in enumerate(specs))
    return CudaProbe("2.13.0+cu128", "12.8", None, gpus)


def test_the_page_has_a_recipe_for_every_node_it_promises():
    nodes = {name for name, _ in recipes()}
    assert {"1x24GiB", "2x24GiB", "4x24GiB", "8x80GiB"} <= nodes
    launchers = [o for _, overrides in recipes() for o in overrides if o.startswith("hydra/launcher=")]
    assert launchers.count("hydra/launcher=slurm") >= 4 and launchers.count("hydra/launcher=ray_local") >= 4


@pytest.mark.parametrize(("size", "overrides"), recipes(), ids=lambda v: v if isinstance(v, str) else " ".join(v)[:70])
def test_each_recipe_composes_and_fits_its_node(size, overrides, monkeypatch):
    monkeypatch.setattr("harness.backends.vllm_setup.check_build", lambda python, devices: None)
    for point in sweep_points(overrides):
        # Values, keys and launcher settings as the command line checks them (CUDA aside: this machine has none).
        assert problems(compose_cfg([*point, "reader.allow_cpu=true"], return_hydra_config=True)) == [], point
        cfg = compose_cfg(point, return_hydra_config=True)
        assert device_problems(cfg, probe=node(size), environ={}) == [], point


@pytest.mark.process
def test_the_resolved_launcher_line_shows_what_the_page_says():
    (command,) = [c for c in command_lines(DOC) if c.module == "harness" and "--resolve" in c.arguments]
    result = subprocess.run(
        [sys.executable, "-m", "harness", *command.arguments], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert "num_gpus: 4" in [line.strip() for line in result.stdout.splitlines()]
    assert "(`num_gpus: 4`)" in DOC.read_text()


@pytest.mark.process
@pytest.mark.parametrize(("module", "arguments"), plan_commands(), ids=lambda a: " ".join(a)[:60])
def test_each_plan_command_runs_and_fits(module, arguments):
    result = subprocess.run(
        [sys.executable, "-m", module, *arguments], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr[-2000:]
    if module == "harness.preview":  # a sweep preview: every job listed, none started
        jobs = sum(line.startswith("job ") for line in result.stdout.splitlines())
        assert result.stdout.startswith(f"{jobs} jobs; none started.") and jobs > 1
    else:
        assert "fits" in result.stdout or "| reader |" in result.stdout
