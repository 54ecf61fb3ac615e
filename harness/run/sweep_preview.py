"""``python -m harness.preview <overrides>``: the jobs a multirun would launch, before any starts.

Hydra cannot combine ``-m`` with ``--cfg``, so this composes the multirun's master config as ``-m`` would,
enumerates its jobs as the basic sweeper does (``harness.run.sweep_jobs``) and composes each as the launcher
will. Per job it prints the overrides, what the launcher gives it (CPUs, GPUs, memory, time limit, resolved
from the launcher config exactly as the launcher resolves it), the reader's GPU memory plan on the GPUs the
job will see, and a cost estimated from measured rates (``harness.plan.rates``). No job runs, nothing is
loaded but the dataset files a question count needs, and no output folder is created.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from omegaconf import DictConfig, OmegaConf

from harness.cache.postgres import redacted
from harness.core.threads import available_cpus
from harness.plan.gpus import GpuSpec, describe
from harness.plan.rates import JOB, SELECTION, read_price
from harness.run.job_times import LOG, LocalRates, local_rates
from harness.run.preview_launch import cache_line, launcher_block, sweep_file_lines

HERE = "this machine"  # a rate learned from this machine's recorded jobs
ELSEWHERE = "another machine"  # a documented rate, measured on the machine its page names
PROMPT_ALLOWANCE = 512  # as the GPU check plans a run: budget + instruction, question and template


@dataclass(frozen=True)
class Resources:
    launcher: str
    cpus: int
    gpus: int | None  # None: every GPU of the machine (the basic and joblib launchers restrict none)
    at_once: int | None  # jobs running together (None: as many as the scheduler allows)
    extra: str = ""
    processes: int | None = None  # processes the jobs run in (None: one per job)

    def line(self, node: list[GpuSpec]) -> str:
        gpus = _gpus(self.gpus, node)
        if self.gpus is None and node:
            gpus += f" ({describe(node)})"
        parallel = f"{self.at_once} at once" if self.at_once else "as many at once as the scheduler allows"
        return f"{self.cpus} CPUs, {gpus}; {parallel} ({self.launcher}{self.extra})"


def _gpus(count: int | None, node: list[GpuSpec]) -> str:
    if count is None:  # the launcher restricts none: the job sees what the machine (or --gpus) has
        count = len(node)
        return "0 GPUs (none on this machine; --gpus names a node's)" if not count else f"all {count} GPU(s)"
    return f"{count} GPU{'s' if count != 1 else ''}"


def launcher_resources(master: DictConfig) -> Resources:
    """What every job of the multirun gets, from ``hydra.launcher`` resolved against the master config."""
    launcher = OmegaConf.to_container(master.hydra.launcher, resolve=True)
    assert isinstance(launcher, dict)
    target = str(launcher.get("_target_", "")).lower()
    choice = str(OmegaConf.select(master, "hydra.runtime.choices.hydra/launcher", default="basic"))
    name = f"hydra/launcher={choice}"
    if "submitit" in target:
        memory = f", {launcher.get('mem_gb')} GB memory" if launcher.get("mem_gb") else ""
        extra = f"{memory}, {launcher.get('timeout_min')} min limit"
        at_once = launcher.get("array_parallelism") if "slurm" in target else 1
        cpus = int(launcher.get("cpus_per_task") or 1)
        return Resources(name, cpus, int(launcher.get("gpus_per_node") or 0), at_once, extra)
    if "ray" in target:
        remote = (launcher.get("ray") or {}).get("remote") or {}
        return Resources(name, int(remote.get("num_cpus") or 1), int(remote.get("num_gpus") or 0), None)
    if "joblib" in target:
        n_jobs = int(launcher.get("n_jobs") or 1)
        jobs = available_cpus() if n_jobs <= 0 else n_jobs
        return Resources(name, max(1, available_cpus() // jobs), None, jobs, ", threads = CPUs / jobs", jobs)
    return Resources(name, available_cpus(), None, 1, ", in this process", 1)


def question_count(job: DictConfig, counted: dict[str, int | None]) -> int | None:
    """Questions the job reads: ``dataset.sample_size``, or the dataset's size (its file read once)."""
    dataset = job.get("dataset")
    if dataset is None:
        return None
    size = dataset.get("sample_size")
    key = OmegaConf.to_yaml(dataset)
    if key not in counted:
        try:
            from hydra.utils import instantiate

            from harness.run.dataset_check import dataset_loader_config

            counted[key] = len(instantiate(dataset_loader_config(dataset), tokenizer=None))
        except Exception:  # noqa: BLE001 - a file missing here is the job's own check; the count stays open
            counted[key] = None
    total = counted[key]
    if size is not None and (total is None or int(size) < total):
        return int(size)
    return total


def _reader(job: DictConfig) -> dict[str, Any]:
    reader = OmegaConf.to_container(job.reader, resolve=True)
    assert isinstance(reader, dict)
    return reader


def memory_line(job: DictConfig, resources: Resources, node: list[GpuSpec]):
    """The reader's plan on the GPUs the job will see: (line, plan or None, fits)."""
    from harness.plan.reader_plan import plan_reader
    from harness.run.device_check import reader_gpus

    reader = _reader(job)
    name = reader.get("name", "?")
    needed = reader_gpus(reader)
    if not bool(job.get("read", True)):
        return "no reader (read=false)", None, True
    if needed == 0:
        return f"reader {name} on the CPU: no GPU plan", None, True
    if not node:
        return f"reader {name} needs {needed} GPU(s): name the node's GPUs with --gpus (e.g. 4x24GiB)", None, True
    seen = len(node) if resources.gpus is None else resources.gpus
    if seen > len(node):
        return f"the launcher asks for {seen} GPUs, the node has {len(node)} ({describe(node)})", None, False
    try:
        plan = plan_reader(reader, node[:seen], int(job.get("budget") or 0) + PROMPT_ALLOWANCE, label=f"reader={name}")
    except (ValueError, FileNotFoundError) as error:
        return f"no plan for reader {name}: {error}", None, True
    need = max(plan.per_gpu_bytes, default=0)
    if not plan.fits:
        return f"does not fit: {plan.problem}", plan, False
    return f"{plan.placement}, fullest GPU {need / 2**30:.1f} GiB; {plan.precision}", plan, True


def cost(job: DictConfig, questions: int | None, plan, local: LocalRates | None):
    """(seconds or None, text): the job's estimated wall time, each figure marked by where its rate comes
    from: this machine's recorded jobs (``harness.run.job_times``) or a documented one of another machine."""
    from harness.plan.memory import backend_of
    from harness.run.device_check import reader_gpus

    if questions is None:
        return None, "questions unknown (dataset file not found here)"
    mine = local.selection(str(job.dataset.get("name"))) if local else None
    select = questions * (mine if mine is not None else SELECTION.seconds)
    overhead = local.job_s if local and local.job_s is not None else JOB.seconds
    parts = [
        f"{questions} questions",
        f"select {select:.1f} s [{HERE if mine is not None else ELSEWHERE}]",
        f"job {overhead:.2f} s [{HERE if local and local.job_s is not None else ELSEWHERE}]",
    ]
    total = select + overhead
    if bool(job.get("read", True)):
        reader = _reader(job)
        device = "gpu" if reader_gpus(reader) else "cpu"
        measured = local.read.get((str(reader.get("name")), device)) if local else None
        if measured is not None:
            total += questions * measured
            parts.append(f"read {questions * measured:.1f} s [{HERE}]")
        else:
            try:
                backend = backend_of(reader)
            except ValueError:
                backend = "server"
            quantized = bool(reader.get("quantization"))
            price = read_price(str(reader.get("name")), device, backend, quantized, plan.params if plan else None)
            if price.seconds is None:
                return None, ", ".join(parts) + f"; read: {price.basis}"
            total += questions * price.seconds
            parts.append(f"read {questions * price.seconds:.1f} s [{ELSEWHERE}: {price.basis}]")
    return total, f"{total:.1f} s = " + " + ".join(parts[1:]) + f" for {parts[0]}"


def preview(overrides: list[str], node: list[GpuSpec]) -> tuple[list[str], bool]:
    """The preview's lines, and whether every job's plan fits."""
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from hydra.types import RunMode

    from harness.plan.cli import CONFIG_DIR
    from harness.run.device_check import register_resolvers
    from harness.run.sweep_compose import compose_once
    from harness.run.sweep_jobs import compose_job, job_overrides

    compose_once()
    register_resolvers()  # ${reader_gpus:} and ${parallel_jobs:} in the launcher configs
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        hydra = GlobalHydra.instance().hydra
        assert hydra is not None
        master = hydra.compose_config("config", overrides, run_mode=RunMode.MULTIRUN, with_log_configuration=False)
        loader = hydra.config_loader
        jobs = job_overrides(master, loader)
        resources = launcher_resources(master)
        local = local_rates(str(master.paths.cache_dir))
        lines = [f"{len(jobs)} jobs; none started. Each gets {resources.line(node)}.", ""]
        lines += [*launcher_block(master), cache_line(master), *sweep_file_lines(overrides), ""]
        counted: dict[str, int | None] = {}
        seconds: list[float | None] = []
        fits = True
        for number, job_args in enumerate(jobs):
            job = compose_job(master, job_args, loader)
            memory, plan, job_fits = memory_line(job, resources, node)
            fits = fits and job_fits
            estimate, text = cost(job, question_count(job, counted), plan, local)
            seconds.append(estimate)
            lines += [
                f"job {number}: {' '.join(redacted(a) for a in job_args) or '(no overrides)'}",
                f"  resources  {resources.cpus} CPUs, {_gpus(resources.gpus, node)}",
                f"  memory     {memory}",
                f"  cost       {text}",
            ]
    GlobalHydra.instance().clear()
    lines += ["", _totals(seconds, resources, local)]
    if local is not None:
        lines.append(f"rates [{HERE}]: {local.jobs} jobs recorded on {local.machine} (paths.cache_dir/{LOG})")
    lines += [
        f"rates [{ELSEWHERE}]: {rate.name} {rate.figure} {rate.unit} on a {rate.machine}, {rate.page}: {rate.command}"
        for rate in (SELECTION, JOB)
    ]
    return lines, fits


def _totals(seconds: list[float | None], resources: Resources, local: LocalRates | None) -> str:
    known = [s for s in seconds if s is not None]
    # A process start (imports, Hydra, model loads outside the stages): once for the basic launcher, which runs
    # every job in this process; once per job for launchers that start a process each.
    starts = min(resources.processes or len(seconds), len(seconds)) if local and local.start_s else 0
    start = (local.start_s or 0.0) * starts if local else 0.0
    total = sum(known) + start
    gpus = resources.gpus or 0
    unpriced = len(seconds) - len(known)
    tail = f"; {unpriced} job(s) unpriced" if unpriced else ""
    wall = ""
    if resources.at_once:
        wall = f", about {total / min(resources.at_once, max(1, len(seconds))) / 60:.1f} min of wall time"
    gpu_hours = f", {total * gpus / 3600:.2f} GPU-hours" if gpus else ""
    started = f" including {starts} process start(s) of {local.start_s:.1f} s [{HERE}]" if starts and local else ""
    return (
        f"total: {total:.0f} s, {total / 60:.1f} job-minutes{started}{wall}, {total * resources.cpus / 3600:.2f} "
        f"CPU-hours{gpu_hours}{tail} (cold caches; warm caches skip the selection and the answers read before)"
    )
