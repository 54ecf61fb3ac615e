"""A reader chosen by the CPU it runs on: the fastest measured backend for that kind of machine.

On a CPU with bf16 instructions (``avx512_bf16``, AMX) the transformers backend in bfloat16 with row
decoding (batch-invariant) read Qwen2.5-Coder-0.5B about 5x faster than llama.cpp's Q4_K_M GGUF on the same
prompts (the installed llama.cpp build uses AVX2 only); elsewhere float32 matmuls leave llama.cpp the
faster choice (``benchmarks/bench_readers.py``, figures in docs/readers.md). The rows name what was chosen
(``reader_numerics``), and the reader's identity covers it, so answers of the two never share a cache entry.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from harness.backends.precision import cpu_dtype, cpu_flags

CHOICES = ("with_bf16", "without_bf16")


def chosen_settings(settings: Mapping[str, Any], flags: frozenset[str] | None = None) -> dict[str, Any]:
    """The reader config this machine runs: the shared keys with the block for its CPU."""
    missing = [key for key in CHOICES if not isinstance(settings.get(key), Mapping)]
    if missing:
        raise ValueError(f"a machine-chosen reader needs the reader configs {list(CHOICES)}; missing {missing}")
    block = "with_bf16" if cpu_dtype(cpu_flags() if flags is None else flags) == "bfloat16" else "without_bf16"
    shared = {k: v for k, v in settings.items() if k not in CHOICES and k not in ("_target_", "_recursive_")}
    return {**shared, **settings[block]}


def fastest_reader(**settings: Any):
    """The reader of ``chosen_settings``, built (Hydra calls this with ``_recursive_: false``)."""
    from hydra.utils import instantiate
    from omegaconf import OmegaConf

    plain = {k: OmegaConf.to_container(v, resolve=True) if OmegaConf.is_config(v) else v for k, v in settings.items()}
    return instantiate(chosen_settings(plain))
