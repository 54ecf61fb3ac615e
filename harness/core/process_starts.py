"""Jobs started as several processes from outside (torchrun, ``srun`` with several tasks), found from the
variables those launchers set.

A harness job is one process: it loads, retrieves, packs, reads and writes its rows once. A reader that reads
on several devices starts its own processes (Lightning's ``ddp_spawn``), each given its rank by Lightning.
Started N times from outside, the whole job would run N times over the same output folder, and a reader
spawning its own children under one of those ranks would hand them another rank's variables. Such a start
is refused before anything loads, with the command that starts the job once.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class ExternalStart:
    """A start by ``launcher`` as process ``rank`` of ``world_size``."""

    launcher: str
    rank: int
    world_size: int

    def refusal(self) -> str:
        """The one-line config error, naming the command that starts the job once."""
        if self.launcher == "torchrun":
            instead = (
                "run `python -m harness ... reader.trainer.devices=N` without torchrun (or torchrun --nproc-per-node=1)"
            )
        else:
            instead = (
                "submit one task per job (hydra.launcher.tasks_per_node=1, or srun --ntasks=1 --gpus-per-task=N) "
                "with reader.trainer.devices=N"
            )
        return (
            f"started by {self.launcher} as process {self.rank} of {self.world_size}: every process would run the "
            "whole job (retrieval, packing, reading, rows) into the same folder; a reader on N devices starts its "
            f"own N processes; {instead}"
        )


def _int(environ: Mapping[str, str], name: str) -> int | None:
    value = environ.get(name, "").strip()
    return int(value) if value.lstrip("-").isdigit() else None


def external_start(environ: Mapping[str, str] | None = None) -> ExternalStart | None:
    """The outside start of several processes this process is one of, or None (one process, or a launcher
    that starts the job once: submitit with one task, Ray, joblib)."""
    environ = os.environ if environ is None else environ
    world = _int(environ, "WORLD_SIZE")
    if "TORCHELASTIC_RUN_ID" in environ or ("LOCAL_WORLD_SIZE" in environ and world is not None):
        if world is not None and world > 1:
            return ExternalStart("torchrun", _int(environ, "RANK") or 0, world)
    # Only an srun step runs its tasks as copies of the command; a batch script's own step (no step id) is
    # one process even when the allocation holds several tasks.
    in_step = "SLURM_STEP_ID" in environ or "SLURM_STEPID" in environ
    tasks = _int(environ, "SLURM_STEP_NUM_TASKS") or _int(environ, "SLURM_NTASKS") or _int(environ, "SLURM_NPROCS")
    if in_step and tasks is not None and tasks > 1 and "SLURM_PROCID" in environ:
        return ExternalStart("srun", _int(environ, "SLURM_PROCID") or 0, tasks)
    return None
