"""What would fit when a plan does not: the smallest change, named by the config keys that make it.

Candidates are planned for real (same counts, same rules) and kept when they fit, fewest GPUs first:
a smaller batch when the weights fit but the KV cache or activations do not; for a transformers reader an
8-bit or 4-bit bitsandbytes quantization on one GPU, and a device map over more GPUs like the largest given;
for a vLLM reader another tensor-parallel size, the AWQ release of the same model, a higher
``gpu_memory_utilization``. Extra GPUs are proposed up to ``MAX_GPUS``.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from harness.plan.configs import model_config_path, reader_source
from harness.plan.gpus import GpuSpec, describe, gib, size_label
from harness.plan.memory import MemoryPlan, device_map_mode, measure_plan, trainer_devices, uses_device_map
from harness.plan.weights import canonical_quantization

MAX_GPUS = 8
TENSOR_PARALLEL_SIZES = (1, 2, 4, 8)
HIGHER_UTILIZATION = 0.95


def _with(reader: Mapping[str, Any], **changes: Any) -> dict[str, Any]:
    """A copy of ``reader`` with ``changes``; ``vllm__key`` sets ``reader.vllm.key``."""
    updated = copy.deepcopy(dict(reader))
    for key, value in changes.items():
        if key.startswith("vllm__"):
            updated["vllm"] = {**(updated.get("vllm") or {}), key[len("vllm__") :]: value}
        else:
            updated[key] = value
    return updated


def _fits(reader, gpus, prompt_tokens, batch_size) -> MemoryPlan | None:
    try:
        plan, _ = measure_plan(reader, gpus, prompt_tokens, batch_size)
    except (ValueError, FileNotFoundError):
        return None
    return plan if plan.fits else None


def _copies(gpu: GpuSpec, count: int) -> list[GpuSpec]:
    return [gpu] * count


def _largest_batch(reader, gpus, prompt_tokens, batch: int) -> int | None:
    """The largest batch below ``batch`` that fits, by bisection; None when even one sequence does not."""
    low, high = 0, batch - 1
    while low < high:
        middle = (low + high + 1) // 2
        if _fits(reader, gpus, prompt_tokens, middle):
            low = middle
        else:
            high = middle - 1
    return low or None


def _transformers(reader, gpus: list[GpuSpec], prompt_tokens, batch_size, plan: MemoryPlan) -> list[tuple]:
    found: list[tuple[int, str]] = []
    largest = gpus[0]
    size = size_label(largest.memory_bytes)
    quantization = canonical_quantization(reader.get("quantization"))
    device_map = uses_device_map(reader)
    batch = batch_size or int(reader.get("batch_size") or 1)
    if batch > 1 and _fits(reader, gpus, prompt_tokens, 1):
        best = _largest_batch(reader, gpus, prompt_tokens, batch)
        if best:
            found.append((plan.gpus_used or 1, f"reader.batch_size={best}"))
    replicas = 1 if device_map else trainer_devices(reader, len(gpus))
    prefix = ""
    if replicas > 1:
        trainer = dict(reader.get("trainer") or {})
        if replicas > len(gpus) and _fits(
            _with(reader, trainer={**trainer, "devices": len(gpus)}), gpus, prompt_tokens, batch_size
        ):
            found.append((len(gpus), f"reader.trainer.devices={len(gpus)}"))
        # One copy placed by a device map or a quantizer is never replicated per device.
        reader, prefix = _with(reader, trainer={**trainer, "devices": 1}), "reader.trainer.devices=1 "
        if _fits(reader, [largest], prompt_tokens, batch_size):
            return found  # a copy fits one GPU: only the number of copies was wrong
    spread = None
    if not device_map and len(gpus) > 1:
        for count in range(2, len(gpus) + 1):
            if _fits(_spread(reader, gpus[:count]), gpus[:count], prompt_tokens, batch_size):
                spread = count
                found.append((count, f"{prefix}{_spread_keys(gpus[:count])}"))
                break
    if device_map and device_map_mode(reader) == "sequential" and len(gpus) > 1:
        if _fits(_with(reader, device_map="auto"), gpus, prompt_tokens, batch_size):
            spread = len(gpus)
            found.append((len(gpus), f"reader.device_map=auto over {describe(gpus)}"))
    lighter = {None: ("int8", "nf4"), "int8": ("nf4",)}.get(quantization, ())
    single_quant = None
    for method in lighter:
        if _fits(_with(reader, quantization=method), [largest], prompt_tokens, batch_size):
            single_quant = method
            found.append((1, f"{prefix}reader.quantization={method} on one GPU"))
            break
    # Up to the number given, the plan itself (device_map) or the proposal above tried the given GPUs.
    for count in range(max(2, len(gpus) + 1), MAX_GPUS + 1 if spread is None else 0):
        more = _copies(largest, count)
        if _fits(_spread(reader, more), more, prompt_tokens, batch_size):
            found.append((count, f"{prefix}{_spread_keys(more)} ({count} x {size})"))
            break
    if single_quant is None and lighter:
        method = lighter[-1]
        for count in range(2, MAX_GPUS + 1):
            tried = gpus[:count] if count <= len(gpus) else _copies(largest, count)
            if _fits(_spread(_with(reader, quantization=method), tried), tried, prompt_tokens, batch_size):
                found.append((count, f"{prefix}reader.quantization={method} {_spread_keys(tried)}"))
                break
    return found


def _spread(reader, gpus: list[GpuSpec]) -> dict[str, Any]:
    """``reader`` balanced by a device map over exactly ``gpus``: one ``max_memory`` entry per GPU, each
    the whole card, which also tells a launcher how many GPUs the job needs."""
    mode = reader.get("device_map") if reader.get("device_map") in ("balanced", "balanced_low_0") else "auto"
    return _with(reader, device_map=mode, max_memory=[g.memory_bytes for g in gpus])


def _spread_keys(gpus: list[GpuSpec]) -> str:
    sizes = ",".join(size_label(g.memory_bytes).replace(" ", "") for g in gpus)
    return f"reader.max_memory=[{sizes}]"


def _awq_release(reader) -> str | None:
    source = reader_source(reader)
    if source.endswith(("-AWQ", "-GPTQ-Int4")) or "/" not in source:
        return None
    candidate = f"{source}-AWQ"
    return candidate if model_config_path(candidate) is not None else None


def _vllm(reader, gpus: list[GpuSpec], prompt_tokens, batch_size, plan: MemoryPlan) -> list[tuple]:
    found: list[tuple[int, str]] = []
    settings = reader.get("vllm") or {}
    tp_now = int(settings.get("tensor_parallel_size") or 1)
    dp = int(settings.get("data_parallel_size") or 1)
    largest = gpus[0]
    for tp in TENSOR_PARALLEL_SIZES:
        count = tp * dp
        if tp == tp_now and count <= len(gpus):
            continue  # the plan itself
        tried = gpus[:count] if count <= len(gpus) else _copies(largest, count)
        if _fits(_with(reader, vllm__tensor_parallel_size=tp), tried, prompt_tokens, batch_size):
            where = "" if count <= len(gpus) else f" on {describe(tried)}"
            found.append((count, f"reader.vllm.tensor_parallel_size={tp}{where}"))
            break
    utilization = float(settings.get("gpu_memory_utilization") or 0.9)
    if utilization < HIGHER_UTILIZATION and len(gpus) >= tp_now * dp:
        if _fits(_with(reader, vllm__gpu_memory_utilization=HIGHER_UTILIZATION), gpus, prompt_tokens, batch_size):
            found.append((tp_now * dp, f"reader.vllm.gpu_memory_utilization={HIGHER_UTILIZATION}"))
    awq = _awq_release(reader) if settings.get("quantization") is None else None
    if awq is not None:
        for tp in TENSOR_PARALLEL_SIZES:
            count = tp * dp
            tried = gpus[:count] if count <= len(gpus) else _copies(largest, count)
            changed = _with(
                reader, pretrained=awq, dtype="float16", vllm__quantization="awq", vllm__tensor_parallel_size=tp
            )
            if _fits(changed, tried, prompt_tokens, batch_size):
                parallel = f" reader.vllm.tensor_parallel_size={tp}" if tp != tp_now else ""
                where = "one GPU" if count == 1 else describe(tried)
                found.append((count, f"reader.pretrained={awq} reader.vllm.quantization=awq{parallel} on {where}"))
                break
    return found


def suggestions(
    reader: Mapping[str, Any], gpus: list[GpuSpec], prompt_tokens: int, batch_size: int | None, plan: MemoryPlan
) -> list[str]:
    """Changes that make ``reader`` fit, fewest GPUs first (``gpus`` sorted largest first)."""
    if plan.backend == "vllm":
        found = _vllm(reader, gpus, prompt_tokens, batch_size, plan)
    else:
        found = _transformers(reader, gpus, prompt_tokens, batch_size, plan)
    return [text for _, text in sorted(found, key=lambda item: item[0])]


def problem_line(plan: MemoryPlan, gpus: list[GpuSpec], reason: str | None, suggestion: str | None) -> str:
    """One line: the reader, what was found, where it does not fit, and what would."""
    if suggestion:
        tail = f"; smallest placement that fits: {suggestion}"
    elif reason is None:
        tail = f"; nothing up to {MAX_GPUS} GPUs of {size_label(gpus[0].memory_bytes)} fits"
    else:
        tail = ""  # not a matter of memory: the reason names the key
    if reason is None:
        what = f"{plan.precision} weights {gib(plan.weight_bytes)} + KV {gib(plan.kv_bytes)}"
        if not plan.placement.startswith("device_map"):
            where = plan.placement
        elif len(gpus) == 1:
            where = f"one {size_label(gpus[0].memory_bytes)} GPU"
        else:
            where = f"device_map over {describe(gpus)}"  # every count up to all of them was tried
        reason = f"{what} do not fit {where}"
    return f"{plan.reader}: {reason}{tail}"
