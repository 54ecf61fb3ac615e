"""Where the bytes go: the KV cache, the activations of a forward pass, and how weights spread over GPUs.

Allowances per GPU beyond weights and KV cache (the planned figures are meant to err high, never low):

- the runtime overhead, :func:`runtime_overhead`: ``RUNTIME_OVERHEAD_BYTES`` (3 GiB) for the CUDA context PyTorch
  creates (0.3-0.5 GiB with lazy module loading), the cuBLAS/cuDNN workspaces of the first matmuls and the
  caching allocator's blocks that a prefill's freed tensors leave, plus ``ALLOCATOR_SLACK`` (1%) of what the GPU
  holds otherwise. Calibrated on an H200 (torch 2.11, random-weight Qwen2.5 models built from the packaged
  configs, bf16, 16 prompts x 2048 tokens): the device's peak exceeded weights + KV + activations + 1 GiB by
  2.05 GB (7B), 2.01 GB (14B) and 2.40 GB (32B); the two terms give 2.37, 2.55 and 2.96 GB
  (``tests/test_plan.py`` holds those figures). ``CUDA_CONTEXT_BYTES`` (0.5 GiB) is the part already taken
  when weights are placed, so what accelerate sees as free memory at load time.
- activations, computed: a transformers prefill runs the whole padded batch in one forward, and its peak is
  the MLP of one layer for every prompt token of the batch: ``act(gate) * up`` holds three tensors of the
  intermediate width at once (four where one Linear computes gate and up together, as in Phi-3), beside two
  hidden-sized residual tensors; a quantized model also dequantizes its largest Linear weight into the
  compute dtype for the matmul. vLLM (a fused SiLU-and-mul: three widths) profiles one step of
  ``VLLM_PROFILE_TOKENS`` tokens (its default ``max_num_batched_tokens`` for the offline engine) and keeps the
  float32 logits of ``VLLM_MAX_NUM_SEQS`` sequences, and captures CUDA graphs (``VLLM_CUDA_GRAPH_BYTES``).

The device map follows transformers' ``_get_device_map`` (``transformers.integrations.accelerate``) over
*every* GPU the job sees, or those ``reader.max_memory`` names: free memory per GPU (within ``max_memory``;
90% of it on a single GPU without one), balanced to ``total / n`` plus 1.25 x the largest block on all but the
last GPU (``auto``, ``balanced``; ``balanced_low_0`` leaves GPU 0 what the others cannot take; ``sequential``
does not balance), times 0.9 for a bitsandbytes model (``adjust_max_memory``), filled in module order with
the largest remaining block kept free on the first GPU. ``tests/test_plan_device_map.py`` checks the split
against transformers' own functions on a model built on the meta device. A block that finds no GPU would be
offloaded to the CPU, which a bitsandbytes model refuses and any model pays for on every token: the plan counts
it as not fitting.
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.plan.gpus import GpuSpec
from harness.plan.params import ModelFacts
from harness.plan.weights import Precision, accelerate_block_size, block_bytes

GIB = 2**30
RUNTIME_OVERHEAD_BYTES = 3 * GIB
ALLOCATOR_SLACK = 0.01
CUDA_CONTEXT_BYTES = GIB // 2
SINGLE_GPU_FRACTION = 0.9  # get_balanced_memory on one device, when max_memory is not set
QUANTIZER_MEMORY_FRACTION = 0.9  # Bnb4BitHfQuantizer / Bnb8BitHfQuantizer.adjust_max_memory
BALANCE_BUFFER = 1.25
VLLM_PROFILE_TOKENS = 8192
VLLM_MAX_NUM_SEQS = 256
VLLM_CUDA_GRAPH_BYTES = GIB // 2


def kv_heads_per_rank(facts: ModelFacts, tensor_parallel: int = 1) -> int:
    """KV heads one GPU holds: split across tensor-parallel ranks, replicated when there are fewer than ranks."""
    if tensor_parallel <= 1:
        return facts.num_kv_heads
    return max(1, facts.num_kv_heads // tensor_parallel)


def kv_bytes_per_token(facts: ModelFacts, dtype_bytes: int, tensor_parallel: int = 1) -> int:
    """Keys and values of every layer for one token: 2 x layers x KV heads x head_dim x dtype bytes."""
    return 2 * facts.num_layers * kv_heads_per_rank(facts, tensor_parallel) * facts.head_dim * dtype_bytes


def mlp_width(facts: ModelFacts) -> int:
    return (4 if facts.fused_gate_up else 3) * facts.intermediate_size


def prefill_activation_bytes(facts: ModelFacts, batch: int, prompt_tokens: int, precision: Precision) -> int:
    tokens = batch * prompt_tokens
    width = mlp_width(facts) + 2 * facts.hidden_size
    peak = tokens * width * precision.dtype_bytes
    if precision.quantization in ("nf4", "int8"):
        peak += facts.largest_linear * precision.dtype_bytes
    return peak + 2 * batch * facts.vocab_size * 4  # the last position's float32 logits and their softmax


def vllm_activation_bytes(facts: ModelFacts, tensor_parallel: int, precision: Precision) -> int:
    sharded = 3 * facts.intermediate_size + (facts.num_heads + 2 * facts.num_kv_heads) * facts.head_dim
    width = 2 * facts.hidden_size + sharded // max(1, tensor_parallel)
    return VLLM_PROFILE_TOKENS * width * precision.dtype_bytes + VLLM_MAX_NUM_SEQS * facts.vocab_size * 4


@dataclass(frozen=True)
class Placement:
    gpus: tuple[GpuSpec, ...]  # the GPUs used, in placement order
    weights: tuple[int, ...]  # weight bytes on each
    per_gpu: tuple[int, ...]  # planned peak bytes on each
    capacity: tuple[int, ...]  # bytes the plan may use on each (vLLM: gpu_memory_utilization x memory)
    spilled: bool = False  # some weights found no GPU (accelerate would offload them to the CPU)
    blocks: tuple[tuple[str, ...], ...] = ()  # a device map's modules on each GPU used
    indices: tuple[int, ...] = ()  # a device map's GPUs used, as CUDA numbers them in the job

    @property
    def fits(self) -> bool:
        return not self.spilled and all(need <= cap for need, cap in zip(self.per_gpu, self.capacity, strict=True))

    @classmethod
    def joined(cls, parts: list[Placement]) -> Placement:
        """Placements side by side on disjoint GPUs (replicas, or vLLM's tensor-parallel groups)."""
        return cls(
            tuple(g for p in parts for g in p.gpus),
            tuple(w for p in parts for w in p.weights),
            tuple(b for p in parts for b in p.per_gpu),
            tuple(c for p in parts for c in p.capacity),
        )


DEVICE_MAP_MODES = ("auto", "balanced", "balanced_low_0", "sequential")


def device_map_caps(
    sizes: list[int], total: int, free: list[int], mode: str, user_limits: bool, quantized: bool
) -> list[float]:
    """What each GPU may hold of the weights, as transformers' ``_get_device_map`` works it out from the free
    memory (``max_memory`` when given): ``get_balanced_memory`` (every GPU but the last capped at
    ``total / n`` + 1.25 x the largest block; 90% of a lone GPU when ``max_memory`` is not set; with
    ``balanced_low_0`` GPU 0 keeps only what the others cannot take), or the free memory as it is for
    ``sequential``; then 90% of it for a bitsandbytes model (``adjust_max_memory``)."""
    caps = [float(f) for f in free]
    if mode != "sequential":
        used = [i for i, cap in enumerate(caps) if cap > 0]
        low_zero = mode == "balanced_low_0" and len(used) > 1
        if len(used) == 1 and not user_limits:
            caps[used[0]] *= SINGLE_GPU_FRACTION
        per_gpu = total // (len(used) - 1 if low_zero else max(1, len(used))) + int(BALANCE_BUFFER * max(sizes))
        for i in used[:-1]:
            caps[i] = min(caps[0] if low_zero and i == 0 else per_gpu, caps[i])
        if low_zero:
            caps[0] = min(max(0, total - sum(caps[1 : len(used)])), caps[0])
    if quantized:
        caps = [cap * QUANTIZER_MEMORY_FRACTION for cap in caps]
    return caps


def free_memory(gpus: list[GpuSpec], limits: list[int] | None) -> list[int]:
    """What accelerate sees free on each GPU at load time, within ``reader.max_memory`` where it is given."""
    free = [gpu.memory_bytes - CUDA_CONTEXT_BYTES for gpu in gpus]
    return free if limits is None else [min(limit, f) for limit, f in zip(limits, free, strict=True)]


def device_map_split(
    facts: ModelFacts, precision: Precision, gpus: list[GpuSpec], limits: list[int] | None = None, mode: str = "auto"
) -> list[list[int]] | None:
    """Block indices per GPU as transformers' device map assigns them over all of ``gpus`` (``infer_auto_device_map``:
    blocks in module order, each on the current GPU while it fits, the largest block still to place kept free on
    GPU 0); None when a block is left for the CPU."""
    sizes = [accelerate_block_size(block, precision) for block in facts.blocks]
    total = sum(sizes) + facts.buffer_bytes
    caps = device_map_caps(
        sizes, total, free_memory(gpus, limits), mode, limits is not None, precision.quantization in ("nf4", "int8")
    )
    assigned: list[list[int]] = [[] for _ in gpus]
    device, used = 0, 0
    for index, size in enumerate(sizes):
        while True:
            reserve = max(sizes[index + 1 :], default=0) if device == 0 else 0
            if used + size <= caps[device] - reserve:
                assigned[device].append(index)
                used += size
                break
            device, used = device + 1, 0
            if device == len(gpus):
                return None
    return assigned


def modules_label(names: tuple[str, ...]) -> str:
    """``embed_tokens, layers 0-20`` for a GPU's share of a device map (decoder layers as index ranges)."""
    parts: list[str] = []
    run: list[int] = []
    for name in [*names, ""]:
        stem, _, last = name.rpartition(".")
        if last.isdigit() and stem.endswith("layers"):
            run.append(int(last))
            continue
        if run:
            parts.append(f"layers {run[0]}-{run[-1]}" if len(run) > 1 else f"layer {run[0]}")
            run = []
        if name:
            parts.append(last or name)
    return ", ".join(parts)


def runtime_overhead(held: int) -> int:
    """What a GPU uses beyond ``held`` bytes of weights, KV cache and activations (see the module docstring)."""
    return RUNTIME_OVERHEAD_BYTES + int(ALLOCATOR_SLACK * held)


def place_device_map(
    facts: ModelFacts,
    precision: Precision,
    gpus: list[GpuSpec],
    kv_total: int,
    activations: int,
    limits: list[int] | None = None,
    mode: str = "auto",
) -> Placement:
    """Weights over ``gpus`` by the device map, each GPU also holding its layers' KV cache, the activations
    and the runtime overhead."""
    split = device_map_split(facts, precision, gpus, limits, mode)
    if split is None:
        return Placement(tuple(gpus), (), (), tuple(g.memory_bytes for g in gpus), spilled=True)
    kv_per_layer = kv_total / max(1, facts.num_layer_blocks)
    weights, peaks = [], []
    for indices in split:
        held = sum(block_bytes(facts.blocks[i], precision) for i in indices)
        layers = sum(facts.blocks[i].is_layer for i in indices)
        weights.append(held)
        need = int(held + layers * kv_per_layer + activations)
        peaks.append(need + runtime_overhead(need) if indices else 0)
    used = [i for i, indices in enumerate(split) if indices]
    # The buffers (rotary tables) follow the first GPU's modules.
    peaks[used[0]] += facts.buffer_bytes
    weights[used[0]] += facts.buffer_bytes
    return Placement(
        tuple(gpus[i] for i in used),
        tuple(weights[i] for i in used),
        tuple(peaks[i] for i in used),
        tuple(gpus[i].memory_bytes for i in used),
        blocks=tuple(tuple(facts.blocks[b].name for b in split[i]) for i in used),
        indices=tuple(used),
    )


def place_single(gpu: GpuSpec, weights: int, kv_total: int, activations: int) -> Placement:
    """The whole model on one GPU, moved there after loading (no device map)."""
    need = weights + kv_total + activations
    peak = need + runtime_overhead(need)
    return Placement((gpu,), (weights,), (peak,), (gpu.memory_bytes,))


def place_tensor_parallel(
    gpus: list[GpuSpec], weights: int, kv_per_rank: int, activations: int, utilization: float
) -> Placement:
    """vLLM: every rank holds 1/tp of the weights and of the KV heads, within ``utilization`` of its memory."""
    tp = len(gpus)
    weight_share = -(-weights // tp)
    need = weight_share + kv_per_rank + activations
    peak = need + runtime_overhead(need) + VLLM_CUDA_GRAPH_BYTES
    return Placement(
        tuple(gpus),
        tuple(weight_share for _ in gpus),
        tuple(peak for _ in gpus),
        tuple(int(utilization * g.memory_bytes) for g in gpus),
    )
