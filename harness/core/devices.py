"""What CUDA this process can use, found before anything heavy loads, and what a GPU reader needs of it.

A GPU node can still hand a run no GPU: a CPU build of torch (the wheel pip picks on a machine without the
CUDA index), ``CUDA_VISIBLE_DEVICES`` set empty (Ray does so for a task given ``num_gpus: 0``; ``-1`` is the
older idiom), or a driver torch cannot talk to. Each of these turns a 32B study into a CPU run that loads
for minutes and reads for days, so the config check asks :func:`probe_cuda` first and names what it found.

The torch build is read from ``torch/version.py`` without importing torch (an import costs seconds); torch is
imported only when the build has CUDA and devices are not hidden, which is the one case where its answer is
needed (how many devices, how much memory, which compute capability).
"""

from __future__ import annotations

import importlib.util
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

VISIBLE_ENV = "CUDA_VISIBLE_DEVICES"
# The reader.trainer.accelerator values that say a reader reads on CUDA GPUs (Lightning's names for them).
CUDA_ACCELERATORS = ("gpu", "cuda")
# Compute capability from which a GPU computes bf16 natively (Ampere); below (T4 7.5, V100 7.0) torch may
# still say bf16 is "supported" by emulating it, at a fraction of fp16's speed, and vLLM refuses it.
NATIVE_BF16_CAPABILITY = (8, 0)


@dataclass(frozen=True)
class Gpu:
    """One visible CUDA device."""

    index: int
    name: str
    memory_bytes: int
    capability: tuple[int, int]

    @property
    def kind(self) -> str:
        """The device kind as answers depend on it: ``cuda-sm80`` (capability 8.0)."""
        return f"cuda-sm{self.capability[0]}{self.capability[1]}"


@dataclass(frozen=True)
class CudaProbe:
    """What this process was found to have: the torch build, ``CUDA_VISIBLE_DEVICES`` as set (None: unset)
    and the visible devices (empty when CUDA is unusable)."""

    torch_version: str | None
    torch_cuda: str | None
    visible: str | None
    gpus: tuple[Gpu, ...] = field(default_factory=tuple)
    error: str | None = None  # what torch said when a CUDA build found no device

    @property
    def usable(self) -> bool:
        return bool(self.gpus)

    @property
    def hidden(self) -> bool:
        """Devices hidden by the environment: set empty, or to ``-1`` (no device index is negative)."""
        return self.visible is not None and (self.visible.strip() == "" or self.visible.strip().startswith("-"))

    def findings(self) -> str:
        """Why CUDA is unusable, every reason found, in words: ``CUDA_VISIBLE_DEVICES='' hides every GPU;
        torch 2.13.0+cpu is a CPU build``; empty when it is usable."""
        if self.usable:
            return ""
        found = []
        if self.hidden:
            found.append(f"{VISIBLE_ENV}={self.visible!r} hides every GPU (Ray sets it so for num_gpus: 0)")
        if self.torch_version is None:
            found.append("torch is not installed")
        elif self.torch_cuda is None:
            found.append(f"torch {self.torch_version} is a CPU build (install a CUDA wheel of torch)")
        elif not self.hidden:
            found.append(
                f"torch {self.torch_version} (CUDA {self.torch_cuda}) sees no device ({self.error or 'no GPU'})"
            )
        return "; ".join(found)

    def describe(self) -> str:
        """One line: the visible devices, or why there are none."""
        if not self.usable:
            return f"no CUDA: {self.findings()}"
        names = ", ".join(
            f"cuda:{g.index} {g.name} {g.memory_bytes / 2**30:.0f} GiB sm{g.capability[0]}{g.capability[1]}"
            for g in self.gpus
        )
        return f"{len(self.gpus)} CUDA device(s): {names}"


def torch_build(spec_origin: str | None = None) -> tuple[str | None, str | None]:
    """(torch version, CUDA version or None) of the installed torch, read from its ``version.py``."""
    if spec_origin is None:
        spec = importlib.util.find_spec("torch")
        if spec is None or spec.origin is None:
            return None, None
        spec_origin = spec.origin
    text = (Path(spec_origin).parent / "version.py").read_text()
    version = re.search(r"^__version__\s*=\s*['\"]([^'\"]+)['\"]", text, re.MULTILINE)
    cuda = re.search(r"^cuda(?:\s*:[^=]*)?=\s*['\"]([^'\"]+)['\"]", text, re.MULTILINE)
    return (version.group(1) if version else "unknown"), (cuda.group(1) if cuda else None)


def _torch_gpus() -> tuple[tuple[Gpu, ...], str | None]:
    import torch

    try:
        count = torch.cuda.device_count()
        gpus = []
        for index in range(count):
            props = torch.cuda.get_device_properties(index)
            gpus.append(Gpu(index, props.name, int(props.total_memory), (props.major, props.minor)))
        return tuple(gpus), None if gpus else "device_count() is 0: check the driver (nvidia-smi)"
    except (RuntimeError, AssertionError) as error:
        return (), str(error).splitlines()[0]


def probe_cuda(environ: Mapping[str, str] | None = None) -> CudaProbe:
    """This process's CUDA (see the module docstring); ``environ`` stands for ``os.environ``."""
    environ = os.environ if environ is None else environ
    version, cuda = torch_build()
    visible = environ.get(VISIBLE_ENV)
    probe = CudaProbe(version, cuda, visible)
    if cuda is None or probe.hidden:
        return probe
    gpus, error = _visible_gpus(visible)
    return CudaProbe(version, cuda, visible, gpus, error)


@cache
def _visible_gpus(visible: str | None) -> tuple[tuple[Gpu, ...], str | None]:
    # Keyed by the variable: torch reads it once, at its first CUDA call, so later changes are not seen anyway.
    return _torch_gpus()


def native_dtype(capability: tuple[int, int] | None) -> str:
    """``dtype: auto`` on a GPU: bfloat16 where it computes bf16 natively (capability >= 8.0), else float16.
    Unknown capability: bfloat16 (every GPU the ladder's plans name is Ampere or newer)."""
    if capability is None or tuple(capability) >= NATIVE_BF16_CAPABILITY:
        return "bfloat16"
    return "float16"


def device_count(devices: Any) -> int | None:
    """The devices ``reader.trainer.devices`` names (a count, or a list of indices); None where Lightning
    chooses (``auto``, ``-1``, null)."""
    if isinstance(devices, Sequence) and not isinstance(devices, str):
        return len(devices)
    text = str(devices).strip()
    return int(text) if text.lstrip("-").isdigit() and int(text) > 0 else None


def wants_cuda(trainer: Mapping[str, Any] | None) -> bool:
    """Whether ``reader.trainer`` asks for CUDA GPUs (the GPU rungs say ``accelerator: gpu``)."""
    return str((trainer or {}).get("accelerator", "cpu")).lower() in CUDA_ACCELERATORS


def cuda_problem(name: str, trainer: Mapping[str, Any] | None, allow_cpu: bool, probe: CudaProbe) -> str | None:
    """One line when a reader that asks for CUDA would get none, unless it opted into the CPU."""
    if not wants_cuda(trainer) or probe.usable or allow_cpu:
        return None
    return (
        f"reader {name!r} reads on CUDA (reader.trainer.accelerator={(trainer or {}).get('accelerator')}) but "
        f"found {probe.findings()}; run it on a GPU node, or set reader.allow_cpu=true to read on the CPU"
    )


def resolve_device(device: str, owner: str) -> str:
    """A torch device for an encoder or reranker: ``auto`` is ``cuda`` when CUDA is usable, else ``cpu``;
    ``cuda`` (or ``cuda:N``) without CUDA is refused naming ``owner`` and what was found."""
    text = str(device).strip().lower()
    if text == "auto":
        return "cuda" if probe_cuda().usable else "cpu"
    if text.startswith("cuda"):
        probe = probe_cuda()
        if not probe.usable:
            raise ValueError(f"{owner}.device={device} but found {probe.findings()}; use {owner}.device=auto or cpu")
    return str(device)


# faiss-cpu and faiss-gpu-* install the same ``faiss`` package folder: with both, whichever was installed last
# wins file by file, and an index may come from one build and its GPU calls from another.
FAISS_DISTRIBUTIONS = ("faiss-cpu", "faiss-gpu-cu12", "faiss-gpu-cu11", "faiss-gpu")


def faiss_builds() -> list[str]:
    """The faiss distributions installed (by their metadata; nothing is imported)."""
    from importlib.metadata import PackageNotFoundError, version

    found = []
    for name in FAISS_DISTRIBUTIONS:
        try:
            found.append(f"{name}-{version(name)}")
        except PackageNotFoundError:
            continue
    return found
