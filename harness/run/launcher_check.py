"""Checks of ``hydra.launcher`` before a sweep launches its jobs: values the launcher would fail on with
its own traceback, a Ray cluster address nothing answers on, and SLURM's commands missing on this host."""

from __future__ import annotations

from typing import Any

from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from harness.core.values import is_int


def launcher_problems(cfg: DictConfig) -> list[str]:
    """Values of ``hydra.launcher`` the launcher would fail on with its own traceback (joblib's
    ``n_jobs=0``, a submitit time limit below one minute); checked before a sweep launches its jobs."""
    try:
        launcher = OmegaConf.select(cfg, "hydra.launcher", throw_on_resolution_failure=False)
    except OmegaConfBaseException:
        return []
    if not isinstance(launcher, DictConfig):
        return []
    target = str(launcher.get("_target_", ""))
    found = []
    if "joblib" in target.lower() and "n_jobs" in launcher:
        n_jobs = launcher.get("n_jobs")
        if n_jobs is not None and (not is_int(n_jobs) or n_jobs == 0):
            found.append(
                f"hydra.launcher.n_jobs={n_jobs!r} is out of range; allowed: an integer >= 1 (jobs at once), "
                "a negative integer (-1: one per CPU), or null"
            )
    if "submitit" in target.lower():
        for name in ("timeout_min", "signal_delay_s", "max_num_timeout"):
            if name not in launcher:
                continue
            value = launcher.get(name)
            low = 1 if name == "timeout_min" else 0
            if not is_int(value) or value < low:
                found.append(f"hydra.launcher.{name}={value!r} is out of range; allowed: an integer >= {low}")
    if "ray" in target.lower():
        found += ray_address_problems(OmegaConf.select(launcher, "ray.init.address", default=None))
    if target.endswith("SlurmLauncher"):
        found += slurm_host_problems()
    return found


def slurm_host_problems() -> list[str]:
    """SLURM's submission commands missing on this host: submitit would fail in its own traceback after
    composing every job."""
    import shutil

    missing = [command for command in ("sbatch", "srun") if shutil.which(command) is None]
    if not missing:
        return []
    return [
        f"hydra/launcher=slurm submits with SLURM's {' and '.join(missing)}, not found on this host's PATH; "
        "launch from a SLURM login node, or try the same path here with hydra/launcher=submitit_local"
    ]


RAY_CONNECT_SECONDS = 3.0


def ray_address_problems(address: Any, timeout: float = RAY_CONNECT_SECONDS) -> list[str]:
    """An existing Ray cluster's address that nothing answers on: ray.init would wait for minutes. The address
    is tried here, as given, before Ray sees it (Ray rewrites a loopback address to the machine's own
    interface address); ``null`` and ``auto``/``local`` are Ray's own choices and left to it."""
    import socket

    if address is None or str(address).strip() in ("", "auto", "local"):
        return []
    text = str(address).strip()
    hostport = text.split("://", 1)[1] if "://" in text else text
    host, _, port = hostport.rpartition(":")
    key = "hydra.launcher.ray.init.address"
    if not host or not port.isdigit():
        return [f"{key}={text!r} is not HOST:PORT (or ray://HOST:PORT); allowed: a running cluster's address, or null"]
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout):
            pass
    except OSError as error:
        return [
            f"{key}={text!r}: no Ray cluster answers there ({error.strerror or error}, tried for {timeout:.0f} s); "
            "allowed: the address `ray start --head` printed, or null to start a local cluster"
        ]
    return []
