"""Checks of where a run will compute, before any model or dataset loads: a reader that asks for CUDA and
would get none, a start by torchrun or srun that would run the job once per process, vLLM replicas x tensor
parallel beyond the visible GPUs, and launchers that would hand a GPU reader no GPU or the same GPU twice.

Each problem is one line naming the key, what was found and what would work (exit 2 from the command line).
Nothing here imports torch unless the installed torch is a CUDA build and devices are not hidden
(``harness.core.devices``), so on a CPU node the check costs milliseconds.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from harness.core.devices import CudaProbe, cuda_problem, device_count, faiss_builds, probe_cuda, wants_cuda
from harness.core.max_memory import max_memory_bytes, max_memory_problem
from harness.core.process_starts import external_start
from harness.core.values import is_int
from harness.run.check_values import select
from harness.run.service_check import READER_CLASSES, VLLM_READER

LOCAL_READERS = (READER_CLASSES["transformers"], VLLM_READER)


def _plain(node: Any) -> Any:
    return OmegaConf.to_container(node, resolve=True) if isinstance(node, DictConfig) else node


def reader_gpus(reader: Mapping[str, Any] | None) -> int:
    """The GPUs a reader config needs on its node: 0 for a CPU reader; a vLLM reader's replicas x tensor
    parallel size; a transformers reader's ``trainer.devices``, or, for a model spread by a device map, one
    GPU per ``reader.max_memory`` entry (transformers balances it over every GPU the job sees)."""
    if not reader or not wants_cuda(reader.get("trainer")):
        return 0
    if reader.get("_target_") == VLLM_READER:
        vllm = reader.get("vllm") or {}
        return int(vllm.get("tensor_parallel_size") or 1) * int(vllm.get("data_parallel_size") or 1)
    try:
        limits = max_memory_bytes(reader.get("max_memory"))
    except ValueError:
        limits = None  # reported by the config check
    if limits:
        return len(limits)
    count = device_count((reader.get("trainer") or {}).get("devices", 1))
    return 1 if count is None else count


def reader_gpus_resolver(*, _root_: DictConfig) -> int:
    """``${reader_gpus:}`` in a launcher config: the GPUs the launcher gives each job. One job's config: its
    reader's. A multirun's master config (what the launcher is built from), or the hydra node alone that
    ``--cfg hydra`` prints: the most any of the sweep's jobs needs (``harness.run.sweep_jobs``)."""
    from harness.run.sweep_jobs import launched_readers

    return max((reader_gpus(reader) for reader in launched_readers(_root_)), default=0)


def parallel_jobs_resolver(cpu_jobs: int, *, _root_: DictConfig) -> int:
    """``${parallel_jobs:N}`` in the joblib launcher: N jobs at once when no job's reader needs a GPU, else 1
    (joblib's processes all see every GPU, and each would put its reader on cuda:0)."""
    return 1 if reader_gpus_resolver(_root_=_root_) else int(cpu_jobs)


def register_resolvers() -> None:
    if not OmegaConf.has_resolver("reader_gpus"):
        OmegaConf.register_new_resolver("reader_gpus", reader_gpus_resolver)
    if not OmegaConf.has_resolver("parallel_jobs"):
        OmegaConf.register_new_resolver("parallel_jobs", parallel_jobs_resolver)


def _launcher(cfg: DictConfig) -> DictConfig | None:
    """``hydra.launcher`` of the composed config, or of the running job when the config has no hydra node."""
    try:
        node = OmegaConf.select(cfg, "hydra.launcher", throw_on_resolution_failure=False)
    except OmegaConfBaseException:
        node = None
    if isinstance(node, DictConfig):
        return node
    from hydra.core.hydra_config import HydraConfig

    if HydraConfig.initialized():
        return HydraConfig.get().launcher
    return None


def launcher_gpu_problems(launcher: DictConfig | None, reader: Mapping[str, Any]) -> list[str]:
    """A launcher that would give a GPU reader no GPU (Ray's num_gpus, SLURM's gpus_per_node), cuda:0 for
    several jobs at once (joblib), or that would run the whole job once per task (SLURM tasks_per_node)."""
    if launcher is None:
        return []
    target = str(launcher.get("_target_", "")).lower()
    needed = reader_gpus(reader)
    name = reader.get("name", "?")
    found = []

    def value(key: str) -> Any:
        try:
            return OmegaConf.select(launcher, key, default=None)
        except OmegaConfBaseException:
            return None

    if "ray" in target and needed:
        num_gpus = value("ray.remote.num_gpus")
        if not isinstance(num_gpus, (int, float)) or num_gpus < needed:
            found.append(
                f"hydra.launcher.ray.remote.num_gpus={num_gpus!r} but reader {name!r} needs {needed} GPU(s): Ray "
                f"would hide every GPU from the job; set hydra.launcher.ray.remote.num_gpus={needed} (or leave it "
                "at ${reader_gpus:})"
            )
    if "joblib" in target and needed:
        n_jobs = value("n_jobs")
        if n_jobs is None or not is_int(n_jobs) or n_jobs != 1:
            found.append(
                f"hydra.launcher.n_jobs={n_jobs!r} runs several jobs at once on this node and every one of them "
                f"would put reader {name!r} on the same GPU (cuda:0); set hydra.launcher.n_jobs=1, or use "
                "hydra/launcher=ray_local, which gives each job GPUs of its own"
            )
    if "submitit" in target:
        tasks = value("tasks_per_node")
        if is_int(tasks) and tasks > 1:
            found.append(
                f"hydra.launcher.tasks_per_node={tasks} runs the whole job {tasks} times per node; set "
                f"hydra.launcher.tasks_per_node=1 and reader.trainer.devices={tasks}: the reader starts one "
                "process per GPU itself"
            )
        gpus = value("gpus_per_node")
        if needed and (not is_int(gpus) or gpus < needed):
            found.append(
                f"hydra.launcher.gpus_per_node={gpus!r} but reader {name!r} needs {needed} GPU(s); set "
                f"hydra.launcher.gpus_per_node={needed} (or leave it at ${{reader_gpus:}})"
            )
    return found


# Tokens a prompt holds besides its packed context (instruction, question, chat template): the plan sizes the
# KV cache for budget + this before retrieval has said how long the longest prompt is.
PROMPT_ALLOWANCE = 512


def plan_problems(reader: Mapping[str, Any], probe: CudaProbe, budget: int | None) -> list[str]:
    """The memory plan (``harness.plan``) of ``reader`` on the visible GPUs: its one line when it does not fit.
    A model whose ``config.json`` is neither packaged nor in the hub cache is not planned (its load will say
    what is missing)."""
    import logging

    from harness.plan import plan_reader
    from harness.plan.gpus import visible_gpus

    try:
        plan = plan_reader(reader, visible_gpus(probe), prompt_tokens=int(budget or 0) + PROMPT_ALLOWANCE)
    except (FileNotFoundError, ValueError) as error:
        logging.getLogger(__name__).warning("no memory plan for reader %r: %s", reader.get("name"), error)
        return []
    return [] if plan.fits or not plan.problem else [plan.problem]


def cuda_problems(reader: Mapping[str, Any], probe: CudaProbe, budget: int | None = None) -> list[str]:
    """A reader asking for CUDA that would get none, more GPUs than are visible, a CPU build of vLLM, or a
    memory plan that does not fit the visible GPUs."""
    unusable = cuda_problem(str(reader.get("name", "?")), reader.get("trainer"), bool(reader.get("allow_cpu")), probe)
    if unusable or not probe.usable or not wants_cuda(reader.get("trainer")):
        return [unusable] if unusable else []
    needed = reader_gpus(reader)
    if needed > len(probe.gpus):
        if reader.get("_target_") == VLLM_READER:
            vllm = reader.get("vllm") or {}
            what = (
                f"reader.vllm.data_parallel_size={vllm.get('data_parallel_size') or 1} x "
                f"reader.vllm.tensor_parallel_size={vllm.get('tensor_parallel_size') or 1}"
            )
        else:
            what = f"reader.trainer.devices={(reader.get('trainer') or {}).get('devices')}"
        return [
            f"{what} needs {needed} GPUs but {len(probe.gpus)} are visible ({probe.describe()}); "
            f"lower it to at most {len(probe.gpus)}, or ask the launcher for {needed}"
        ]
    if reader.get("_target_") == VLLM_READER:
        from harness.backends.vllm_setup import VllmUnavailableError, check_build, vllm_python

        try:
            check_build(vllm_python((reader.get("vllm") or {}).get("python"), cuda=True), len(probe.gpus))
        except VllmUnavailableError as error:
            return [f"reader {reader.get('name', '?')!r}: {error}"]
    return plan_problems(reader, probe, budget)


def device_problems(
    cfg: DictConfig, probe: CudaProbe | None = None, environ: Mapping[str, str] | None = None
) -> list[str]:
    """Every problem of where ``cfg`` would compute (see the module docstring)."""
    start = external_start(environ)
    found = [start.refusal()] if start is not None else []
    builds = faiss_builds()
    if len(builds) > 1:
        found.append(
            f"faiss is installed twice ({', '.join(builds)}): the builds share the faiss package folder; keep one: "
            "pip uninstall -y " + " ".join(b.rsplit("-", 1)[0] for b in builds) + " && pip install faiss-gpu-cu12 "
            "(GPU nodes, `make setup-gpu`) or faiss-cpu"
        )
    present, node = select(cfg, "reader")
    if not present or not isinstance(node, DictConfig) or node.get("_target_") not in LOCAL_READERS:
        return found
    try:
        reader = _plain(node)
    except OmegaConfBaseException:
        return found  # an unresolvable value is reported by the value rules
    assert isinstance(reader, dict)
    unreadable = max_memory_problem(reader)
    if unreadable:
        return [*found, unreadable]
    found += launcher_gpu_problems(_launcher(cfg), reader)
    if bool(cfg.get("read", True)):
        budget = cfg.get("budget")
        found += cuda_problems(reader, probe if probe is not None else probe_cuda(environ), budget)
    return found


# On import: every composer of the config (the command line, harness.plan, the tests) imports this module
# through the config check before it resolves a launcher config.
register_resolvers()
