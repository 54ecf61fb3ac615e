"""The Ray launcher on a real local cluster: `ray start --head` on a free port in a temporary folder, a read=false
sweep through `hydra/launcher=ray_local` with `hydra.launcher.ray.init.address` set, the rows equal to the basic
launcher's; a sweep with a failing job exits non-zero and names it. The cluster is stopped at the end."""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import pandas as pd
import pytest

from tests.conftest import REPO
from tests.helpers.frozen_code import harness_env

DEMO = REPO / "harness" / "data" / "demo" / "demo_multihop.json"
SWEEP = ["-m", "read=false", "logger=none", "dataset.sample_size=3", "budget=64,96", "seed=42,13"]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def ray_command() -> str:
    command = Path(sys.executable).with_name("ray")
    if not command.exists():
        raise AssertionError(
            f"{command} not found: `make test` installs ray with the dev extras (pip install -e '.[dev]')"
        )
    return str(command)


@pytest.fixture(scope="module")
def ray_cluster():
    """A head node on 127.0.0.1; its workers see the harness environment (cache and models folders)."""
    # Ray's socket paths must stay short: a temp folder directly under /tmp, not pytest's deep one.
    temp = Path(tempfile.mkdtemp(prefix="ray-", dir="/tmp"))
    cache = temp / "cache"
    env = {**harness_env(cache), "RAY_USAGE_STATS_ENABLED": "0", "PYTHONPATH": str(REPO)}
    port = free_port()
    start = [
        ray_command(),
        "start",
        "--head",
        "--node-ip-address=127.0.0.1",
        f"--port={port}",
        f"--temp-dir={temp / 'ray'}",
        "--num-cpus=2",
        "--include-dashboard=false",
        "--disable-usage-stats",
    ]
    started = subprocess.run(start, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert started.returncode == 0, started.stdout[-2000:] + started.stderr[-2000:]
    try:
        yield f"127.0.0.1:{port}", env, cache
    finally:
        subprocess.run([ray_command(), "stop", "--force"], env=env, capture_output=True, timeout=120, check=False)
        shutil.rmtree(temp, ignore_errors=True)


def sweep(args: list[str], env: dict, timeout: float = 900) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "harness", *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def rows(sweep_dir: Path) -> pd.DataFrame:
    frames = [pd.read_parquet(p) for p in sorted(sweep_dir.glob("*/rows.parquet"))]
    keep = ["question_id", "packer", "budget", "seed", "context", "context_tokens", "answer_in_context", "recall"]
    return pd.concat(frames)[keep].sort_values(["budget", "seed", "question_id"]).reset_index(drop=True)


@pytest.mark.slow
def test_a_sweep_on_a_ray_cluster_gives_the_basic_launchers_rows(ray_cluster, tmp_path):
    address, env, cache = ray_cluster
    paths = [f"paths.cache_dir={cache}", f"paths.models_dir={REPO / '.cache' / 'models'}"]
    on_ray = sweep(
        [
            *SWEEP,
            *paths,
            "hydra/launcher=ray_local",
            f"hydra.launcher.ray.init.address={address}",
            f"hydra.sweep.dir={tmp_path / 'ray'}",
        ],
        env,
    )
    assert on_ray.returncode == 0, on_ray.stdout[-3000:] + on_ray.stderr[-3000:]
    basic = sweep([*SWEEP, *paths, f"hydra.sweep.dir={tmp_path / 'basic'}"], env)
    assert basic.returncode == 0, basic.stderr[-3000:]
    assert len(list((tmp_path / "ray").glob("*/summary.json"))) == 4
    pd.testing.assert_frame_equal(rows(tmp_path / "ray"), rows(tmp_path / "basic"))


@pytest.mark.slow
def test_a_failing_job_on_ray_fails_the_sweep_and_is_named(ray_cluster, tmp_path):
    address, env, cache = ray_cluster
    bad = tmp_path / "bad.json"
    bad.write_text('[{"_id": "x", "question": ')  # truncated JSON
    result = sweep(
        [
            "-m",
            "read=false",
            "logger=none",
            "dataset.sample_size=3",
            f"dataset.path={bad},{DEMO}",
            f"paths.cache_dir={cache}",
            "hydra/launcher=ray_local",
            f"hydra.launcher.ray.init.address={address}",
            f"hydra.sweep.dir={tmp_path / 'sweep'}",
        ],
        env,
    )
    assert result.returncode == 1, result.stdout[-3000:] + result.stderr[-3000:]
    assert "1 sweep job(s) failed:" in result.stderr
    assert f"dataset.path={bad}" in result.stderr and (tmp_path / "sweep" / "0" / "error.txt").exists()
    assert (tmp_path / "sweep" / "1" / "summary.json").exists()


def test_the_ray_launcher_config_composes_without_a_store_size_for_an_existing_cluster():
    from tests.conftest import compose_cfg

    cfg = compose_cfg(
        ["hydra/launcher=ray_local", "hydra.launcher.ray.init.address=127.0.0.1:6379"], return_hydra_config=True
    )
    init = cfg.hydra.launcher.ray.init
    # Present and null: the plugin would otherwise set a store size, which ray.init refuses for an existing cluster.
    assert init.address == "127.0.0.1:6379" and "object_store_memory" in init and init.object_store_memory is None
    assert cfg.hydra.launcher._target_.endswith(".RayLauncher")
