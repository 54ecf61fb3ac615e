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

The device map follows transformers' ``device_map="auto"`` (``transformers.integrations.accelerate``):
free memory per GPU (90% of it on a single GPU), balanced to ``total / n`` plus 1.25 x the largest block on
all but the last GPU, times 0.9 for a bitsandbytes model (``adjust_max_memory``), filled in module order with
the largest remaining block kept free on the first GPU. A block that finds no GPU would be offloaded to the
CPU, which a bitsandbytes model refuses and any model pays for on every token: the plan counts it as not
fitting.
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


def _device_map_caps(sizes: list[int], gpus: list[GpuSpec], quantized: bool) -> list[float]:
    caps = [float(gpu.memory_bytes - CUDA_CONTEXT_BYTES) for gpu in gpus]
    if len(caps) == 1:
        caps[0] *= SINGLE_GPU_FRACTION
    else:
        per_gpu = sum(sizes) // len(caps) + int(BALANCE_BUFFER * max(sizes))
        caps = [min(per_gpu, cap) for cap in caps[:-1]] + caps[-1:]
    if quantized:
        caps = [cap * QUANTIZER_MEMORY_FRACTION for cap in caps]
    return caps


def device_map_split(facts: ModelFacts, precision: Precision, gpus: list[GpuSpec]) -> list[list[int]] | None:
    """Block indices per GPU as ``device_map="auto"`` assigns them; None when a block is left for the CPU."""
    sizes = [accelerate_block_size(block, precision) for block in facts.blocks]
    caps = _device_map_caps(sizes, gpus, precision.quantization in ("nf4", "int8"))
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


def runtime_overhead(held: int) -> int:
    """What a GPU uses beyond ``held`` bytes of weights, KV cache and activations (see the module docstring)."""
    return RUNTIME_OVERHEAD_BYTES + int(ALLOCATOR_SLACK * held)


def place_device_map(
    facts: ModelFacts, precision: Precision, gpus: list[GpuSpec], kv_total: int, activations: int
) -> Placement:
    """Weights over ``gpus`` by the device map, each GPU also holding its layers' KV cache, the activations
    and the runtime overhead."""
    split = device_map_split(facts, precision, gpus)
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
