"""The precision a model runs in when its config says ``dtype: auto``: chosen from the machine.

On a GPU: bfloat16 where the device computes it natively (compute capability >= 8.0), else float16
(``torch.cuda.is_bf16_supported()`` is true on a T4 or V100 too, where bf16 is emulated; vLLM refuses it).
On a CPU: bfloat16 only where the CPU has bf16 instructions (``avx512_bf16``, or AMX's ``amx_bf16``);
elsewhere float32. Without them PyTorch emulates bf16 matmuls, and a bf16 prefill measured 3-6x slower than
float32 on an AVX2-only machine, while on a machine with AMX bf16 is the fast path. The choice is logged
once, and the reader and tree-LM cache identities hold the chosen dtype, never ``auto``: answers in bf16
and float32 differ.
"""

from __future__ import annotations

import logging
from functools import cache
from pathlib import Path

from harness.core.devices import native_dtype, probe_cuda

log = logging.getLogger(__name__)

BF16_CPU_FLAGS = ("avx512_bf16", "amx_bf16")


def _first_cpu_field(cpuinfo: str | None, names: tuple[str, ...]) -> str | None:
    """The value of the first of ``names`` in ``/proc/cpuinfo`` (or in the text given); None elsewhere."""
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text()
        except OSError:
            return None
    for line in cpuinfo.splitlines():
        if line.startswith(names):
            return line.split(":", 1)[1].strip()
    return None


def cpu_flags(cpuinfo: str | None = None) -> frozenset[str]:
    """The feature flags of the first CPU in ``/proc/cpuinfo`` (or of the text given); empty elsewhere."""
    flags = _first_cpu_field(cpuinfo, ("flags", "Features"))  # x86 / ARM
    return frozenset(flags.split()) if flags else frozenset()


def cpu_model(cpuinfo: str | None = None) -> str:
    """The first CPU's model name in ``/proc/cpuinfo`` (or in the text given); "unknown CPU" elsewhere."""
    return _first_cpu_field(cpuinfo, ("model name",)) or "unknown CPU"


def cpu_dtype(flags: frozenset[str]) -> str:
    return "bfloat16" if any(flag in flags for flag in BF16_CPU_FLAGS) else "float32"


@cache
def machine_dtype() -> str:
    """``auto``'s dtype on this machine (see the module docstring), logged once per process."""
    # probe_cuda imports torch only where a CUDA build may see devices: a CPU build answers from its version file.
    probe = probe_cuda()
    if probe.usable:
        capability = min(gpu.capability for gpu in probe.gpus)
        chosen = native_dtype(capability)
        why = f"GPU of compute capability {capability[0]}.{capability[1]}"
    else:
        flags = cpu_flags()
        chosen = cpu_dtype(flags)
        have = [f for f in BF16_CPU_FLAGS if f in flags]
        why = f"CPU with {', '.join(have)}" if have else "CPU without bf16 instructions (avx512_bf16/amx_bf16)"
    log.info("dtype auto: %s (%s)", chosen, why)
    return chosen


def cpu_kind(flags: frozenset[str]) -> str:
    """The CPU's kind as far as a reader's numerics and speed go: ``amx`` (AMX tiles with bf16),
    ``avx512_bf16``, ``avx512``, ``avx2``, or ``other``. Kernels differ between kinds, and so may the last
    bits of a bf16 answer; within a kind they are the same."""
    if "amx_bf16" in flags:
        return "amx"
    if "avx512_bf16" in flags:
        return "avx512_bf16"
    if "avx512f" in flags:
        return "avx512"
    if "avx2" in flags:
        return "avx2"
    return "other"


@cache
def machine_cpu_kind() -> str:
    return cpu_kind(cpu_flags())
