"""``plan_reader``: a reader config and a list of GPUs in, the memory it needs and where it goes out.

A transformers reader (``harness.read.hf.TransformersReader``) holds ``batch_size x num_beams`` sequences of
``prompt_tokens + max_new_tokens`` in its KV cache and prefills the whole batch at once; without a device map
it runs on one GPU, with ``device_map: auto`` (or a bitsandbytes quantization, which always loads through
one) it spreads over the fewest of the given GPUs that hold it. A vLLM reader
(``harness.read.vllm.VllmReader``) runs ``data_parallel_size`` engines of ``tensor_parallel_size`` GPUs each,
and needs KV room for at least one sequence of ``max_model_len`` tokens within
``gpu_memory_utilization`` of every card; it schedules the rest of a request itself, so the plan counts
one resident sequence unless ``batch_size`` is passed.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from harness.core.devices import native_dtype
from harness.core.max_memory import max_memory_bytes
from harness.plan.configs import reader_config_path, reader_source
from harness.plan.facts_cache import cached_model_facts, usable_cache_dir
from harness.plan.gpus import GpuSpec, describe, gib, size_label
from harness.plan.params import ModelFacts
from harness.plan.placement import (
    DEVICE_MAP_MODES,
    VLLM_CUDA_GRAPH_BYTES,
    Placement,
    kv_bytes_per_token,
    modules_label,
    place_device_map,
    place_single,
    place_tensor_parallel,
    prefill_activation_bytes,
    runtime_overhead,
    vllm_activation_bytes,
)
from harness.plan.weights import Precision, canonical_dtype, canonical_quantization, checkpoint_precision, weight_bytes

BNB_QUANTIZATIONS = ("nf4", "int8")


@dataclass(frozen=True)
class MemoryPlan:
    weight_bytes: int
    kv_bytes_per_token: int
    kv_bytes: int
    placement: str
    gpus_used: int
    per_gpu_bytes: list[int]
    fits: bool
    problem: str | None
    suggestion: str | None
    reader: str = ""
    model: str = ""
    backend: str = ""
    precision: str = ""
    params: int = 0
    tokens: int = 0  # per sequence: prompt + answer (vLLM: max_model_len)
    sequences: int = 0
    activation_bytes: int = 0  # per GPU
    overhead_bytes: int = 0  # per GPU
    gpu_capacity: list[int] = field(default_factory=list)  # usable bytes of each GPU used
    gpu_names: list[str] = field(default_factory=list)
    gpu_modules: list[str] = field(default_factory=list)  # a device map's modules on each GPU used
    gpu_numbers: list[int] = field(default_factory=list)  # a device map's GPUs used, as CUDA numbers them
    device_map: dict[str, int] = field(default_factory=dict)  # module -> GPU index, as transformers would place it

    def lines(self) -> list[str]:
        """The plan as aligned ``name  value`` lines, one GPU per line."""
        rows = [
            ("reader", self.reader),
            ("model", f"{self.model} ({self.params / 1e9:.2f} B parameters, {self.backend})"),
            ("precision", self.precision),
            ("weights", gib(self.weight_bytes)),
            (
                "KV cache",
                f"{self.kv_bytes_per_token / 2**10:.1f} KiB/token x {self.tokens} tokens x {self.sequences} "
                f"sequence{'s' if self.sequences != 1 else ''} = {gib(self.kv_bytes)}",
            ),
            ("activations", f"{gib(self.activation_bytes)} per GPU"),
            ("overhead", f"{gib(self.overhead_bytes)} per GPU (CUDA context, workspaces, allocator slack)"),
            ("placement", self.placement),
        ]
        for i, (need, cap) in enumerate(zip(self.per_gpu_bytes, self.gpu_capacity, strict=False)):
            name = self.gpu_names[i] if i < len(self.gpu_names) else f"GPU {i}"
            modules = f": {self.gpu_modules[i]}" if i < len(self.gpu_modules) else ""
            number = self.gpu_numbers[i] if i < len(self.gpu_numbers) else i
            rows.append((f"GPU {number}", f"{gib(need)} of {gib(cap)} ({name}){modules}"))
        rows.append(("fits", "yes" if self.fits else "no"))
        if self.problem:
            rows.append(("problem", self.problem))
        if self.suggestion:
            rows.append(("suggestion", self.suggestion))
        width = max(len(name) for name, _ in rows)
        return [f"{name.ljust(width)}  {value}" for name, value in rows]


def backend_of(reader: Mapping[str, Any]) -> str:
    target = str(reader.get("_target_", ""))
    if target.endswith("VllmReader"):
        return "vllm"
    if target.endswith("TransformersReader"):
        return "transformers"
    raise ValueError(
        f"no GPU plan for reader {target or '(no _target_)'}: the plan covers harness.read.hf.TransformersReader "
        "and harness.read.vllm.VllmReader (llama.cpp readers run on the CPU, server readers elsewhere)"
    )


def resolve_dtype(name: Any, gpus: list[GpuSpec]) -> str:
    """``auto``: bfloat16 when every GPU with a known compute capability has bf16 (8.0 or later), else float16."""
    if name is None or str(name) == "auto":
        known = [g.capability for g in gpus if g.capability is not None]
        return native_dtype(min(known) if known else None)
    return canonical_dtype(str(name))


def _vllm_settings(reader: Mapping[str, Any]) -> Mapping[str, Any]:
    return reader.get("vllm") or {}


def reader_precision(reader: Mapping[str, Any], facts: ModelFacts, dtype: str, backend: str) -> Precision:
    checkpoint = checkpoint_precision(facts, dtype)
    if backend == "transformers":
        method = canonical_quantization(reader.get("quantization"))
        if method is not None and method not in BNB_QUANTIZATIONS:
            raise ValueError(f"reader.quantization={method} is not a transformers reader's; choose nf4 or int8")
        return Precision(dtype, method) if method else (checkpoint or Precision(dtype))
    method = canonical_quantization(_vllm_settings(reader).get("quantization"))
    if method in ("awq", "gptq") and (checkpoint is None or checkpoint.quantization != method):
        raise ValueError(
            f"reader.vllm.quantization={method} needs a checkpoint quantized with {method.upper()}; "
            f"{reader_source(reader)} has no {method} quantization_config"
        )
    if method is None or method in ("awq", "gptq"):
        return checkpoint or Precision(dtype)
    return Precision(dtype, method)


def vllm_model_len(reader: Mapping[str, Any], facts: ModelFacts, tokens: int) -> int:
    """``max_model_len``, or what the harness's engine picks when it is null: a power of two >= 512."""
    configured = _vllm_settings(reader).get("max_model_len")
    if configured:
        return int(configured)
    size = max(512, 1 << (tokens - 1).bit_length())
    if facts.max_positions and tokens <= facts.max_positions:
        size = min(size, int(facts.max_positions))
    return size


@dataclass(frozen=True)
class _Need:
    facts: ModelFacts
    precision: Precision
    weights: int
    kv_per_token: int
    tokens: int
    sequences: int
    activations: int


def _vllm_placement(reader, need: _Need, gpus: list[GpuSpec]) -> tuple[Placement | None, str | None]:
    settings = _vllm_settings(reader)
    tp = int(settings.get("tensor_parallel_size") or 1)
    dp = int(settings.get("data_parallel_size") or 1)
    utilization = float(settings.get("gpu_memory_utilization") or 0.9)
    if need.facts.num_heads % tp:
        return None, (
            f"reader.vllm.tensor_parallel_size={tp} does not divide the model's {need.facts.num_heads} attention heads"
        )
    if len(gpus) < tp * dp:
        return None, (
            f"reader.vllm.tensor_parallel_size={tp} x data_parallel_size={dp} needs {tp * dp} GPUs, "
            f"{len(gpus)} given ({describe(gpus)})"
        )
    kv_rank = need.sequences * need.tokens * kv_bytes_per_token(need.facts, need.precision.dtype_bytes, tp)
    chosen = gpus[: tp * dp]
    groups = [
        place_tensor_parallel(chosen[i : i + tp], need.weights, kv_rank, need.activations, utilization)
        for i in range(0, tp * dp, tp)
    ]
    return Placement.joined(groups), None


def _describe_placement(reader, backend: str, placement: Placement | None, gpus: list[GpuSpec]) -> str:
    if backend == "vllm":
        settings = _vllm_settings(reader)
        tp = int(settings.get("tensor_parallel_size") or 1)
        dp = int(settings.get("data_parallel_size") or 1)
        utilization = float(settings.get("gpu_memory_utilization") or 0.9)
        where = describe(list(placement.gpus)) if placement else describe(gpus)
        replicas = f" x {dp} replicas" if dp > 1 else ""
        return f"vLLM tensor parallel {tp}{replicas} on {where} (gpu_memory_utilization {utilization:g})"
    if placement is None:
        replicas = trainer_devices(reader, len(gpus))
        return f"{replicas} Lightning replicas, one per GPU (reader.trainer.devices={replicas})"
    if uses_device_map(reader):
        within = " within reader.max_memory" if reader.get("max_memory") is not None else ""
        return f"device_map {device_map_mode(reader)} over {describe(list(placement.gpus))}{within}"
    if len(placement.gpus) > 1:
        count = len(placement.gpus)
        return f"{count} Lightning replicas on {describe(list(placement.gpus))} (reader.trainer.devices={count})"
    return f"one {size_label(placement.gpus[0].memory_bytes)} GPU"


def trainer_devices(reader: Mapping[str, Any], available: int) -> int:
    """Lightning's processes for a reader without a device map, each with a whole copy on its own GPU."""
    devices = (reader.get("trainer") or {}).get("devices", 1)
    if isinstance(devices, (list, tuple)):
        return len(devices)
    if devices in ("auto", -1, "-1", None):
        return available
    return max(1, int(devices))


def uses_device_map(reader: Mapping[str, Any]) -> bool:
    return (
        reader.get("device_map") is not None
        or reader.get("max_memory") is not None
        or canonical_quantization(reader.get("quantization")) is not None
    )


def device_map_mode(reader: Mapping[str, Any]) -> str:
    """The device map transformers is asked for (a quantized model or ``max_memory`` without one: ``auto``)."""
    mode = reader.get("device_map") or "auto"
    if mode not in DEVICE_MAP_MODES:
        raise ValueError(
            f"reader.device_map={mode!r} is not planned; the plan follows {', '.join(DEVICE_MAP_MODES)} "
            "(spread over chosen GPUs with reader.max_memory instead of a hand-written map)"
        )
    return str(mode)


def _transformers_placement(
    reader, need: _Need, gpus: list[GpuSpec], in_order: list[GpuSpec]
) -> tuple[Placement | None, str | None]:
    kv_total = need.sequences * need.tokens * need.kv_per_token
    if not uses_device_map(reader):
        replicas = trainer_devices(reader, len(gpus))
        if replicas > len(gpus):
            return (
                None,
                f"reader.trainer.devices={replicas} needs {replicas} GPUs, {len(gpus)} given ({describe(gpus)})",
            )
        copies = [place_single(gpu, need.weights, kv_total, need.activations) for gpu in gpus[:replicas]]
        return Placement.joined(copies), None
    # transformers spreads the model over every GPU the job sees (in CUDA order), or over max_memory's.
    limits = max_memory_bytes(reader.get("max_memory"))
    if limits is not None and len(limits) > len(in_order):
        return None, f"reader.max_memory names {len(limits)} GPUs, {len(in_order)} given ({describe(in_order)})"
    used = in_order[: len(limits)] if limits else in_order
    caps = list(limits.values()) if limits else None
    mode = device_map_mode(reader)
    return place_device_map(need.facts, need.precision, used, kv_total, need.activations, caps, mode), None


def _needs(reader, facts: ModelFacts, gpus, prompt_tokens: int, batch_size: int | None, backend: str) -> _Need:
    dtype = resolve_dtype(reader.get("dtype", "auto"), gpus)
    precision = reader_precision(reader, facts, dtype, backend)
    answer = int(reader.get("max_new_tokens") or 0)
    if backend == "vllm":
        tokens = vllm_model_len(reader, facts, prompt_tokens + answer)
        sequences = batch_size or 1
        tp = int(_vllm_settings(reader).get("tensor_parallel_size") or 1)
        activations = vllm_activation_bytes(facts, tp, precision)
    else:
        tokens = prompt_tokens + answer
        sequences = (batch_size or int(reader.get("batch_size") or 1)) * int(reader.get("num_beams") or 1)
        activations = prefill_activation_bytes(facts, sequences, prompt_tokens, precision)
    return _Need(
        facts,
        precision,
        weight_bytes(facts, precision),
        kv_bytes_per_token(facts, precision.dtype_bytes),
        tokens,
        sequences,
        activations,
    )


def measure_plan(
    reader: Mapping[str, Any],
    gpus: list[GpuSpec],
    prompt_tokens: int = 2048,
    batch_size: int | None = None,
    *,
    label: str | None = None,
) -> tuple[MemoryPlan, str | None]:
    """The memory ``reader`` needs on ``gpus`` for prompts of ``prompt_tokens`` tokens and whether it fits, with
    no problem line yet; and the reason it does not fit when that is not memory (a key's value), else None.
    :func:`harness.plan.reader_plan.plan_reader` adds the problem line and what would fit.

    ``batch_size`` replaces the reader's own (a transformers reader's prompts per forward; for vLLM the
    sequences that must be resident at once). ``label`` names the reader in the problem line (default:
    ``reader=<its name>``). Raises ValueError / FileNotFoundError for a config the plan cannot read.
    """
    if not gpus:
        raise ValueError("a plan needs at least one GPU (--gpus 24GiB, or a visible CUDA device)")
    reader = copy.deepcopy(dict(reader))
    backend = backend_of(reader)
    label = label or f"reader={reader.get('name') or reader_source(reader)}"
    facts = cached_model_facts(reader_config_path(reader), usable_cache_dir(reader.get("cache_dir")))
    ordered = sorted(gpus, key=lambda g: g.memory_bytes, reverse=True)
    need = _needs(reader, facts, ordered, prompt_tokens, batch_size, backend)
    problem = None
    if backend == "vllm":
        placement, problem = _vllm_placement(reader, need, ordered)
    else:
        placement, problem = _transformers_placement(reader, need, ordered, list(gpus))
    too_long = _too_long(reader, facts, prompt_tokens) if backend == "vllm" else None
    if too_long:
        placement, problem = None, too_long
    fits = placement is not None and placement.fits
    held = need.weights + need.sequences * need.tokens * need.kv_per_token + need.activations
    overhead = runtime_overhead(held) + (VLLM_CUDA_GRAPH_BYTES if backend == "vllm" else 0)
    plan = MemoryPlan(
        weight_bytes=need.weights,
        kv_bytes_per_token=need.kv_per_token,
        kv_bytes=need.sequences * need.tokens * need.kv_per_token,
        placement=_describe_placement(reader, backend, placement, ordered),
        gpus_used=len(placement.gpus) if placement else _asked_gpus(reader, backend, len(ordered)),
        per_gpu_bytes=list(placement.per_gpu) if placement else [],
        fits=fits,
        problem=None,
        suggestion=None,
        reader=label,
        model=reader_source(reader),
        backend=backend,
        precision=need.precision.label,
        params=facts.params,
        tokens=need.tokens,
        sequences=need.sequences,
        activation_bytes=need.activations,
        overhead_bytes=overhead,
        gpu_capacity=list(placement.capacity) if placement else [],
        gpu_names=[g.name for g in placement.gpus] if placement else [],
        gpu_modules=[modules_label(names) for names in placement.blocks] if placement else [],
        gpu_numbers=list(placement.indices) if placement else [],
        device_map={
            name: index for names, index in zip(placement.blocks, placement.indices, strict=True) for name in names
        }
        if placement
        else {},
    )
    return plan, problem


def _too_long(reader: Mapping[str, Any], facts: ModelFacts, prompt_tokens: int) -> str | None:
    """vLLM refuses a ``max_model_len`` beyond the model's positions (transformers would read on, degraded)."""
    answer = int(reader.get("max_new_tokens") or 0)
    if facts.max_positions and prompt_tokens + answer > int(facts.max_positions):
        return (
            f"prompts of {prompt_tokens} tokens + reader.max_new_tokens={answer} exceed the model's "
            f"{facts.max_positions} positions"
        )
    return None


def _asked_gpus(reader: Mapping[str, Any], backend: str, available: int) -> int:
    """The GPUs a placement that could not be made asks for."""
    if backend == "vllm":
        settings = _vllm_settings(reader)
        return int(settings.get("tensor_parallel_size") or 1) * int(settings.get("data_parallel_size") or 1)
    return trainer_devices(reader, available)
