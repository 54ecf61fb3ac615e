"""What jobs cost on this machine, measured by the jobs themselves, so a sweep preview prices from it.

Every finished job appends one JSON line to ``<paths.cache_dir>/plan/job_times.jsonl``: the machine it ran on
(CPU model and kind, CPUs it had), its dataset, reader and device, its questions, its stage seconds, the seconds
of the whole job and, for a process's first job, the seconds from the process's start to the job (imports,
Hydra). A preview on the same kind of machine reads them back as rates (:func:`local_rates`): seconds per
question of selection per dataset and of reading per reader, seconds per job outside the stages, and seconds
per process start. A cache folder shared by several machines holds each machine's lines apart.
"""

from __future__ import annotations

import fcntl
import json
import os
import statistics
import time
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from harness.core.threads import available_cpus

LOG = Path("plan") / "job_times.jsonl"
RECENT = 500  # lines read back: the newest, so a machine's rates follow its current caches and code
_first_job_done = False


def _process_start() -> float:
    """When this process started (its start tick in /proc after the boot time), else now."""
    try:
        ticks = int(Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()[19])
        boot = next(int(line.split()[1]) for line in Path("/proc/stat").read_text().splitlines() if line[:5] == "btime")
        return boot + ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, StopIteration):
        return time.time()


@lru_cache(maxsize=1)
def machine() -> str:
    """This machine as far as speed goes: CPU model, its kind of vector units, CPUs this process may use."""
    from harness.backends.precision import cpu_model, machine_cpu_kind

    return f"{cpu_model()} ({machine_cpu_kind()}), {available_cpus()} CPUs"


def record(cache_dir: str | Path, entry: dict[str, Any], job_seconds: float) -> None:
    """Append one finished job's figures (``entry``: dataset, reader, device, questions, timings)."""
    global _first_job_done
    line = {"at": time.time(), "machine": machine(), **entry, "job_s": round(job_seconds, 3)}
    if not _first_job_done:
        line["start_s"] = round(max(0.0, time.time() - job_seconds - _process_start()), 3)
        _first_job_done = True
    path = Path(cache_dir) / LOG
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "a", encoding="utf-8") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)  # jobs of a parallel launcher append at once
            handle.write(json.dumps(line) + "\n")
    except OSError:
        pass  # a read-only cache folder: the run's results matter, not its price


@dataclass(frozen=True)
class LocalRates:
    machine: str
    jobs: int  # jobs measured
    start_s: float | None  # per process
    job_s: float | None  # per job, outside the stages
    select: dict[str, float]  # dataset -> seconds per question before reading
    read: dict[tuple[str, str], float]  # (reader, device) -> seconds per question read

    def selection(self, dataset: str) -> float | None:
        if dataset in self.select:
            return self.select[dataset]
        return statistics.median(self.select.values()) if self.select else None


def _lines(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        return []
    found = []
    for text in path.read_text(encoding="utf-8").splitlines()[-RECENT:]:
        try:
            found.append(json.loads(text))
        except ValueError:
            continue  # a line cut by a killed writer
    return found


def local_rates(cache_dir: str | Path) -> LocalRates | None:
    """The rates of this machine's recorded jobs, or None when it has none."""
    here = machine()
    jobs = [j for j in _lines(Path(cache_dir) / LOG) if j.get("machine") == here and j.get("questions")]
    if not jobs:
        return None
    starts = [j["start_s"] for j in jobs if "start_s" in j]
    outside = [j["job_s"] - sum(j["timings"].values()) for j in jobs]
    select: dict[str, list[float]] = {}
    read: dict[tuple[str, str], list[float]] = {}
    for job in jobs:
        stages = {k: v for k, v in job["timings"].items() if k != "read"}
        select.setdefault(job["dataset"], []).append(sum(stages.values()) / job["questions"])
        if job.get("reader"):
            per_question = job["timings"].get("read", 0.0) / job["questions"]
            read.setdefault((job["reader"], job["device"]), []).append(per_question)
    return LocalRates(
        machine=here,
        jobs=len(jobs),
        start_s=statistics.median(starts) if starts else None,
        job_s=max(0.0, statistics.median(outside)),
        select={k: statistics.fmean(v) for k, v in select.items()},
        read={k: statistics.fmean(v) for k, v in read.items()},
    )


def finished_job_entry(cfg: Any, questions: int, timings: dict[str, float], reader: str | None) -> dict[str, Any]:
    """What :func:`record` keeps of a finished job."""
    from omegaconf import OmegaConf

    from harness.run.device_check import reader_gpus

    device = "gpu" if reader and reader_gpus(OmegaConf.to_container(cfg.reader, resolve=True)) else "cpu"
    return {
        "dataset": str(cfg.dataset.get("name")),
        "reader": reader,
        "device": device,
        "questions": questions,
        "timings": {k: round(v, 3) for k, v in timings.items()},
        "pid": os.getpid(),
    }
