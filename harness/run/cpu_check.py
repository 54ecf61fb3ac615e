"""A reader the CPU cannot run as configured, found before any model loads: bf16 asked of a CPU without bf16
instructions (emulated, several times slower than float32) and a llama.cpp build the CPU lacks the
instructions for. A machine-chosen reader (``harness.read.machine``) is checked as the block it chooses."""

from __future__ import annotations

import platform
from collections.abc import Mapping
from typing import Any

from omegaconf import DictConfig, OmegaConf

from harness.backends.precision import BF16_CPU_FLAGS, cpu_dtype, cpu_flags, cpu_kind
from harness.core.devices import wants_cuda
from harness.read.machine import chosen_settings
from harness.run.service_check import READER_CLASSES

MACHINE_READER = "harness.read.machine.fastest_reader"
BF16 = ("bfloat16", "bf16")
# The xllamacpp wheel's llama.cpp is built for AVX2 (its get_system_info() reports AVX2 = 1 and nothing wider).
LLAMA_CPP_NEEDS = "avx2"


def offers(flags: frozenset[str]) -> str:
    """What the CPU offers a reader, in a few words."""
    dtype = cpu_dtype(flags)
    return f"a {cpu_kind(flags)} CPU: dtype auto runs {dtype} here"


def cpu_problems(cfg: DictConfig, flags: frozenset[str] | None = None, machine: str | None = None) -> list[str]:
    reader = OmegaConf.to_container(cfg.reader, resolve=True) if cfg.get("reader") else None
    if not isinstance(reader, Mapping):
        return []
    flags = cpu_flags() if flags is None else flags
    settings: Mapping[str, Any] = chosen_settings(reader, flags) if reader.get("_target_") == MACHINE_READER else reader
    if wants_cuda(settings.get("trainer")) or not flags:  # a GPU reader, or a CPU whose flags are unknown
        return []
    name, target = settings.get("name", "?"), settings.get("_target_")
    found = []
    dtype = str(settings.get("dtype") or "auto").lower()
    local = target in (READER_CLASSES["transformers"], READER_CLASSES["vllm"])
    if local and dtype in BF16 and not any(f in flags for f in BF16_CPU_FLAGS) and not settings.get("emulate_bf16"):
        found.append(
            f"reader {name!r}: reader.dtype={dtype} on a CPU without bf16 instructions ({offers(flags)}); "
            "emulated bf16 runs 3-6x slower than float32: set reader.dtype=auto, or +reader.emulate_bf16=true "
            "to run it anyway"
        )
    x86 = (machine or platform.machine()).lower() in ("x86_64", "amd64")
    if target == READER_CLASSES["llama_cpp"] and x86 and LLAMA_CPP_NEEDS not in flags:
        found.append(
            f"reader {name!r}: the installed llama.cpp build needs {LLAMA_CPP_NEEDS.upper()}, which this CPU "
            f"lacks ({offers(flags)}); use a transformers reader (reader=qwen2.5_coder_0.5b_hf)"
        )
    return found
