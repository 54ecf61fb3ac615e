"""Every bad value is one line naming its key, exit status 2, before any model loads: keys added with ``+``
under the harness's groups, ``cache=<string>``, libpq parameters of ``cache.url``, the launchers' settings
and a vLLM reader's settings."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.run.config_check import launcher_problems, problems
from tests.conftest import REPO, compose_cfg


def found(*overrides: str) -> list[str]:
    return problems(compose_cfg(overrides, return_hydra_config=True))


def one(*overrides: str) -> str:
    lines = found(*overrides)
    assert len(lines) == 1, lines
    assert "\n" not in lines[0]
    return lines[0]


@pytest.mark.parametrize(
    ("override", "key", "closest"),
    [
        ("+cache.netwrok_fs=refuse", "cache.netwrok_fs", "cache.network_fs"),
        ("+paths.cahce_dir=/tmp/x", "paths.cahce_dir", "paths.cache_dir"),
        ("+retriever.encoder.show_progres=false", "retriever.encoder.show_progres", "retriever.encoder.show_progress"),
        ("+packer.truncate_lst=true", "packer.truncate_lst", "packer.truncate_last"),
    ],
)
def test_a_key_added_under_a_group_must_exist(override, key, closest):
    line = one(override)
    assert line.startswith(f"unknown key {key!r}")
    assert line.endswith(f"; did you mean {closest!r}?")


def test_a_key_the_target_takes_may_be_added():
    assert found("+retriever.encoder.show_progress=false") == []
    assert found("++cache.force=true") == []


def test_a_string_where_a_section_belongs_is_named():
    line = one("cache=postgresql://u:SECRET@h/db")
    assert line.startswith("cache='postgresql://u:***@h/db' is not a mapping") and "cache.KEY=VALUE" in line


@pytest.mark.parametrize(
    ("url", "needle"),
    [
        ("postgresql://u:SECRET@h/db?sslmod=require", "unknown connection parameter 'sslmod'"),
        ("postgresql://u:SECRET@h/db?sslmode=requir", "sslmode='requir' is not a mode"),
    ],
)
def test_libpq_parameters_of_the_cache_url_are_checked(url, needle):
    line = one(f"cache.url='{url}'")
    assert line.startswith("cache.url='postgresql://u:***@h/db?") and needle in line
    assert line.endswith(("did you mean 'sslmode'?", "did you mean 'require'?"))
    assert "SECRET" not in line
    assert found("cache.url='postgresql://u@h/db?sslmode=verify-full&connect_timeout=5'") == []


@pytest.mark.parametrize(
    ("overrides", "needle"),
    [
        (["hydra/launcher=local_parallel", "hydra.launcher.n_jobs=0"], "hydra.launcher.n_jobs=0 is out of range"),
        (["hydra/launcher=submitit_local", "hydra.launcher.timeout_min=-5"], "hydra.launcher.timeout_min=-5 is out"),
    ],
)
def test_launcher_settings_are_checked(overrides, needle):
    lines = launcher_problems(compose_cfg(overrides, return_hydra_config=True))
    assert len(lines) == 1 and lines[0].startswith(needle)
    assert launcher_problems(compose_cfg(overrides[:1], return_hydra_config=True)) == []


VLLM = "reader=qwen2.5_3b_vllm"


def test_vllm_settings_are_checked_before_the_engine():
    assert one(VLLM, "reader.vllm.tensor_parallel_size=0", "reader.vllm.python=/usr/bin/env").startswith(
        "reader.vllm.tensor_parallel_size must be a positive integer"
    )
    line = one(VLLM, "+reader.vllm.tensor_paralel=2", "reader.vllm.python=/usr/bin/env")
    assert line.startswith("unknown key 'reader.vllm.tensor_paralel'")
    assert line.endswith("did you mean 'reader.vllm.tensor_parallel_size'?")
    assert one(VLLM, "reader.vllm.python=/no/such/python").startswith("reader.vllm.python=/no/such/python")
    assert found(VLLM, "reader.vllm.python=/no/such/python", "read=false") == []


def test_a_vllm_reader_is_recognised_by_its_class():
    from omegaconf import OmegaConf

    from harness.run.config_check import is_vllm_reader

    assert is_vllm_reader(OmegaConf.create({"_target_": "harness.read.vllm.VllmReader"}))
    assert not is_vllm_reader(OmegaConf.create({"_target_": "harness.read.hf.TransformersReader"}))
    assert not is_vllm_reader(None)
    # Only a vLLM reader's settings are checked: the same bad value under another reader is not read.
    assert found("reader=qwen2.5_3b", "reader.allow_cpu=true", "+reader.vllm.tensor_parallel_size=0") == []


def test_a_reader_config_with_a_backend_key_names_the_class_that_replaces_it():
    # A config written for the single reader class: Hydra would only say that harness.read.reader is gone.
    old = ["+reader.backend=llama_cpp", "reader._target_=harness.read.reader.Reader"]
    assert one(*old) == (
        "reader.backend='llama_cpp': readers name their class in reader._target_ and have no backend key; "
        "set reader._target_=harness.read.llama_cpp.LlamaCppReader and remove reader.backend"
    )
    assert one("reader._target_=harness.read.reader.Reader") == (
        "reader._target_='harness.read.reader.Reader': readers name their class in reader._target_ and have no "
        "backend key; set reader._target_=harness.read.hf.TransformersReader"
    )
    assert "transformers: harness.read.hf.TransformersReader" in one("+reader.backend=onnx")
    assert not [p for p in found() if "reader.backend" in p]  # the packaged reader configs have no backend key


def harness(*args: str, tmp_path: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "WANDB_MODE": "disabled", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    where = [f"hydra.run.dir={tmp_path / 'run'}", f"hydra.sweep.dir={tmp_path / 'sweep'}"]
    command = [sys.executable, "-m", "harness", *args, "logger=none", *where]
    return subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=300, check=False)


@pytest.mark.process
@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["+cache.netwrok_fs=refuse"], "config error: unknown key 'cache.netwrok_fs'"),
        (["cache=foo"], "config error: cache='foo' is not a mapping"),
        (["cache.url='postgresql://u@h/db?sslmode=requir'"], "config error: cache.url="),
        (["-m", "hydra/launcher=local_parallel", "hydra.launcher.n_jobs=0", "budget=64,96"], "hydra.launcher.n_jobs=0"),
        (["-m", "hydra/launcher=submitit_local", "hydra.launcher.timeout_min=-3"], "hydra.launcher.timeout_min=-3"),
        ([VLLM, "reader.vllm.gpu_memory_utilization=2"], "config error: reader.vllm.gpu_memory_utilization"),
    ],
)
def test_the_command_line_names_the_key_and_exits_2(tmp_path, args, needle):
    done = harness(*args, tmp_path=tmp_path)
    assert done.returncode == 2, done.stderr[-2000:]
    errors = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(errors) == 1 and errors[0].startswith("config error: ") and needle in errors[0], done.stderr[-2000:]


def test_an_unreachable_ray_address_is_named_within_seconds():
    import socket
    import time

    from harness.run.config_check import ray_address_problems

    with socket.socket() as probe:  # a loopback port nothing listens on: bound, then closed
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    start = time.perf_counter()
    (line,) = ray_address_problems(f"127.0.0.1:{port}")
    assert time.perf_counter() - start < 5
    assert line.startswith(f"hydra.launcher.ray.init.address='127.0.0.1:{port}': no Ray cluster answers there")
    (line,) = ray_address_problems("ray://nohost")
    assert "is not HOST:PORT" in line
    assert ray_address_problems(None) == [] and ray_address_problems("auto") == []
    with socket.socket() as server:  # a listening port is taken as a cluster (Ray itself checks the rest)
        server.bind(("127.0.0.1", 0))
        server.listen()
        assert ray_address_problems(f"ray://127.0.0.1:{server.getsockname()[1]}") == []


@pytest.mark.process
def test_a_sweep_on_an_unreachable_ray_address_exits_2_naming_it(tmp_path):
    import socket
    import time

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    start = time.perf_counter()
    result = subprocess.run(
        [sys.executable, "-m", "harness", "-m", "hydra/launcher=ray_local",
         f"hydra.launcher.ray.init.address=127.0.0.1:{port}", "logger=none", "read=false",
         f"hydra.sweep.dir={tmp_path / 'sweep'}"],
        cwd=REPO, capture_output=True, text=True, timeout=120, env={**os.environ, "HARNESS_CACHE_DIR": str(tmp_path)},
    )  # fmt: skip
    assert result.returncode == 2, result.stderr[-2000:]
    assert f"hydra.launcher.ray.init.address='127.0.0.1:{port}'" in result.stderr
    assert time.perf_counter() - start < 60


@pytest.mark.process
def test_the_slurm_launcher_on_a_host_without_slurm_is_a_config_error(tmp_path, monkeypatch):
    (line,) = launcher_problems(compose_cfg(["hydra/launcher=slurm"], return_hydra_config=True))
    assert line.startswith("hydra/launcher=slurm submits with SLURM's sbatch and srun, not found") and (
        "hydra/launcher=submitit_local" in line
    )
    # A host that has them (stand-ins on PATH) passes.
    for command in ("sbatch", "srun"):
        (tmp_path / command).write_text("#!/bin/sh\nexit 0\n")
        (tmp_path / command).chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    assert launcher_problems(compose_cfg(["hydra/launcher=slurm"], return_hydra_config=True)) == []
    monkeypatch.undo()
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "harness",
            "-m",
            "hydra/launcher=slurm",
            "read=false",
            f"hydra.sweep.dir={tmp_path / 's'}",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 2 and "config error: hydra/launcher=slurm submits with" in result.stderr
    assert "Traceback" not in result.stderr
