"""What each launcher asks for per job is what its config composes to: `--cfg hydra --resolve` prints it, and a
multirun's launcher, built by Hydra's own plugin loader from the master config, gets the same value, the most
any job of the sweep needs (the master config itself holds no swept reader)."""

from __future__ import annotations

import subprocess
import sys

import pytest
from hydra import initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from hydra.core.plugins import Plugins
from hydra.types import HydraContext, RunMode
from omegaconf import OmegaConf

from harness.run.device_check import reader_gpus
from tests.conftest import CONF, REPO, compose_cfg

# (overrides, GPUs per job): worked out from each config by hand.
READERS = [
    (["reader=smollm2_135m"], 0),  # a CPU reader
    (["reader=qwen2.5_7b_nf4"], 1),  # trainer.devices: 1
    (["reader=qwen2.5_7b", "reader.trainer.devices=4"], 4),  # four Lightning processes
    (["reader=qwen2.5_32b_vllm", "reader.vllm.tensor_parallel_size=4"], 4),  # tensor parallel 4 x 1 replica
    (["reader=qwen2.5_7b_vllm", "reader.vllm.tensor_parallel_size=2", "reader.vllm.data_parallel_size=3"], 6),
]
# Where each launcher holds the count, and the value it gets for a reader needing `gpus` GPUs.
LAUNCHERS = {
    "slurm": ("gpus_per_node", lambda gpus: gpus),
    "ray_local": ("ray.remote.num_gpus", lambda gpus: gpus),
    "local_parallel": ("n_jobs", lambda gpus: 1 if gpus else 2),  # every joblib process sees every GPU
}


@pytest.mark.parametrize("launcher", sorted(LAUNCHERS))
@pytest.mark.parametrize(("overrides", "gpus"), READERS, ids=lambda v: " ".join(v) if isinstance(v, list) else str(v))
def test_the_composed_launcher_asks_for_the_readers_gpus(launcher, overrides, gpus):
    key, expected = LAUNCHERS[launcher]
    cfg = compose_cfg([*overrides, f"hydra/launcher={launcher}"], return_hydra_config=True)
    assert OmegaConf.select(cfg.hydra.launcher, key) == expected(gpus)
    assert reader_gpus(OmegaConf.to_container(cfg.reader, resolve=True)) == gpus


@pytest.mark.process
@pytest.mark.parametrize(
    ("launcher", "overrides", "printed"),
    [
        ("slurm", ["reader=qwen2.5_7b", "reader.trainer.devices=4"], "gpus_per_node: 4"),
        ("ray_local", ["reader=qwen2.5_32b_vllm", "reader.vllm.tensor_parallel_size=4"], "num_gpus: 4"),
        ("local_parallel", ["reader=qwen2.5_7b_nf4"], "n_jobs: 1"),
    ],
)
def test_cfg_hydra_resolve_prints_what_the_launcher_gets(launcher, overrides, printed):
    result = subprocess.run(
        [sys.executable, "-m", "harness", *overrides, f"hydra/launcher={launcher}", "--cfg", "hydra", "--resolve"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert printed in [line.strip() for line in result.stdout.splitlines()]


def built_launcher(arguments: list[str]):
    """The launcher a multirun with these arguments would launch its jobs through, as Hydra builds it."""
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        hydra = GlobalHydra.instance().hydra
        assert hydra is not None
        master = hydra.compose_config("config", arguments, run_mode=RunMode.MULTIRUN, with_log_configuration=False)
        context = HydraContext(config_loader=hydra.config_loader, callbacks=None)  # type: ignore[arg-type]
        return Plugins.instance().instantiate_launcher(hydra_context=context, task_function=print, config=master)


# A swept reader is not in the master config, whose own reader is the default CPU one.
SWEEPS = [
    (["reader=smollm2_135m,qwen2.5_7b_nf4", "budget=96,128"], 1),
    (["reader=qwen2.5_32b_vllm", "reader.vllm.tensor_parallel_size=1,2,4", "seed=1,2"], 4),
    (["+sweeps=reader_ladder"], 1),
    (["+sweeps=smoke", "reader=smollm2_135m"], 0),
]


@pytest.mark.parametrize(("arguments", "gpus"), SWEEPS, ids=lambda v: " ".join(v) if isinstance(v, list) else str(v))
def test_a_multiruns_launchers_get_the_most_any_job_needs(arguments, gpus):
    slurm = built_launcher([*arguments, "hydra/launcher=slurm"])
    assert slurm.params["gpus_per_node"] == gpus  # type: ignore[attr-defined]
    ray = built_launcher([*arguments, "hydra/launcher=ray_local"])
    # What the Ray launcher hands ray.remote for every job (hydra_ray_launcher's launch_job_on_ray).
    assert OmegaConf.to_container(ray.ray_cfg.remote, resolve=True)["num_gpus"] == gpus  # type: ignore[attr-defined]
    joblib = built_launcher([*arguments, "hydra/launcher=local_parallel"])
    assert joblib.joblib["n_jobs"] == (1 if gpus else 2)  # type: ignore[attr-defined]
