"""The GPUs a plan is made for: named on the command line (``--gpus 4x24GiB``) or read from CUDA.

Units are exact: ``GiB`` is 2**30 bytes and ``GB`` is 10**9 bytes (likewise MiB/MB, TiB/TB). A card sold as
"24GB" or "80GB" (RTX 4090, A100 80GB, H100) holds 24 or 80 GiB as CUDA reports it, so write those as GiB;
``GB`` is for sizes measured in decimal units.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from harness.core.devices import CudaProbe, probe_cuda
from harness.core.max_memory import UNITS

# "4x24GiB", "2 x 24 GiB", "80GB", "24GiB@8.6" (compute capability after the @).
_ITEM = re.compile(
    r"^\s*(?:(?P<count>\d+)\s*[x×*]\s*)?(?P<size>\d+(?:\.\d+)?)\s*(?P<unit>[kmgt]i?b|b)"
    r"\s*(?:@\s*(?:sm_?)?(?P<major>\d+)(?:\.(?P<minor>\d+))?)?\s*$",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class GpuSpec:
    name: str
    memory_bytes: int
    capability: tuple[int, int] | None = None


def gib(n: float) -> str:
    """Bytes as GiB with one decimal, the unit every plan line uses."""
    return f"{n / 2**30:.1f} GiB"


def size_label(memory_bytes: int) -> str:
    """A card's size for names and messages: ``24 GiB``, or ``79.6 GiB`` when not a whole number."""
    value = memory_bytes / 2**30
    return f"{value:.0f} GiB" if abs(value - round(value)) < 0.05 else f"{value:.1f} GiB"


def _parse_item(item: str, text: str) -> list[GpuSpec]:
    match = _ITEM.match(item)
    if match is None:
        raise ValueError(
            f"cannot read GPU list {text!r}: {item.strip()!r} is not COUNTxSIZE (e.g. 4x24GiB, 80GB, "
            "2x24GiB,1x40GiB; GiB = 2**30 bytes, GB = 10**9 bytes)"
        )
    count = int(match["count"] or 1)
    memory = int(float(match["size"]) * UNITS[match["unit"].lower()])
    if count < 1 or memory <= 0:
        raise ValueError(f"cannot read GPU list {text!r}: {item.strip()!r} names no GPU memory")
    capability = None
    if match["major"] is not None:
        major = int(match["major"])
        # "@86" (sm_86) and "@8.6" mean the same card.
        if match["minor"] is None and major >= 10:
            major, minor = divmod(major, 10)
        else:
            minor = int(match["minor"] or 0)
        capability = (major, minor)
    name = f"{size_label(memory)} GPU"
    return [GpuSpec(name, memory, capability) for _ in range(count)]


def parse_gpus(text: str) -> list[GpuSpec]:
    """GPUs from ``4x24GiB``, ``80GB`` or ``2x24GiB,1x40GiB``; a ValueError naming the text otherwise."""
    if not text or not text.strip():
        raise ValueError(f"cannot read GPU list {text!r}: it names no GPU")
    return [gpu for item in text.split(",") for gpu in _parse_item(item, text)]


def parse_gpu_groups(text: str) -> list[list[GpuSpec]]:
    """One machine per comma-separated item (``24GiB,4x40GiB``: one 24 GiB card; four 40 GiB cards)."""
    if not text or not text.strip():
        raise ValueError(f"cannot read GPU list {text!r}: it names no GPU")
    return [_parse_item(item, text) for item in text.split(",")]


def describe(gpus: list[GpuSpec]) -> str:
    """``2 x 24 GiB + 1 x 40 GiB``: equal cards counted together, in the order given."""
    parts: list[tuple[int, int]] = []
    for gpu in gpus:
        if parts and parts[-1][1] == gpu.memory_bytes:
            parts[-1] = (parts[-1][0] + 1, gpu.memory_bytes)
        else:
            parts.append((1, gpu.memory_bytes))
    return " + ".join(f"{count} x {size_label(memory)}" for count, memory in parts)


def visible_gpus(probe: CudaProbe | None = None) -> list[GpuSpec]:
    """The CUDA GPUs this process sees (``CUDA_VISIBLE_DEVICES`` applies; ``probe``: an earlier probe of
    them, :func:`harness.core.devices.probe_cuda`); empty without any."""
    found = (probe if probe is not None else probe_cuda()).gpus
    return [GpuSpec(f"cuda:{gpu.index} {gpu.name}", gpu.memory_bytes, gpu.capability) for gpu in found]
