"""Bytes of a model's weights in one precision, from the parameter list of ``params.py``.

The quantized formats store, per Linear weight of ``out x in`` = n elements:

- ``nf4`` (bitsandbytes ``Linear4bit`` as harness.backends.loading configures it: NF4, double quantization,
  uint8 storage; ``bitsandbytes.functional.quantize_4bit``): n/2 bytes of packed 4-bit codes; one absmax per
  block of 64, itself quantized to 8 bits (n/64 bytes) with a float32 absmax per 256 of those blocks; and the
  quant state's tensors: the 16-entry float32 NF4 code, the 256-entry float32 code of the nested
  quantization and a float32 offset (1092 bytes per layer).
- ``int8`` (bitsandbytes ``Linear8bitLt``, LLM.int8): n bytes plus a float32 scale per output row (``SCB``).
- ``awq`` / ``gptq`` (4-bit, group size 128, as the checkpoint's ``quantization_config`` says): n/2 bytes of
  packed codes, per group of 128 inputs a float16 scale and a packed 4-bit zero point per output; GPTQ adds
  an int32 ``g_idx`` per input. ``fp8`` (vLLM's on-the-fly FP8): n bytes and a float32 scale.

Everything a quantizer leaves alone (embeddings, norms, biases, ``lm_head``) stays in the compute dtype.
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.plan.params import Block, ModelFacts

DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}
DTYPE_ALIASES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16", "half": "float16", "float": "float32"}

NF4_BLOCKSIZE = 64  # bitsandbytes' default for 4-bit weights
NESTED_BLOCKSIZE = 256  # double quantization groups the absmax values by 256
NF4_STATE_BYTES = 16 * 4 + 256 * 4 + 4  # NF4 code, nested code, offset: float32 tensors of every Linear4bit
PRE_QUANTIZED = ("awq", "gptq", "fp8")
QUANTIZATIONS = ("nf4", "int8", *PRE_QUANTIZED)
# vLLM's kernel variants store the same tensors as the format they read.
QUANT_ALIASES = {"awq_marlin": "awq", "gptq_marlin": "gptq", "marlin": "gptq"}


def canonical_dtype(name: str) -> str:
    dtype = DTYPE_ALIASES.get(str(name).lower(), str(name).lower())
    if dtype not in DTYPE_BYTES:
        raise ValueError(f"unknown dtype {name!r}; choose one of {sorted(DTYPE_BYTES)} or auto")
    return dtype


def canonical_quantization(name: str | None) -> str | None:
    if name is None or str(name).lower() in ("", "none", "null"):
        return None
    method = QUANT_ALIASES.get(str(name).lower(), str(name).lower())
    if method not in QUANTIZATIONS:
        raise ValueError(f"unknown quantization {name!r}; the plan knows {list(QUANTIZATIONS)}")
    return method


@dataclass(frozen=True)
class Precision:
    dtype: str  # the compute dtype: what every unquantized tensor and the KV cache are stored in
    quantization: str | None = None
    bits: int = 4
    group_size: int = 128

    @property
    def dtype_bytes(self) -> int:
        return DTYPE_BYTES[self.dtype]

    @property
    def label(self) -> str:
        if self.quantization is None:
            return self.dtype
        if self.quantization == "nf4":
            return f"nf4 ({self.dtype} compute)"
        if self.quantization in ("awq", "gptq"):
            return f"{self.quantization} {self.bits}-bit g{self.group_size} ({self.dtype})"
        return f"{self.quantization} ({self.dtype} compute)"


def nf4_linear_bytes(out_features: int, in_features: int) -> int:
    n = out_features * in_features
    blocks = -(-n // NF4_BLOCKSIZE)
    nested = -(-blocks // NESTED_BLOCKSIZE)
    return -(-n // 2) + blocks + 4 * nested + NF4_STATE_BYTES


def int8_linear_bytes(out_features: int, in_features: int) -> int:
    return out_features * in_features + 4 * out_features


def grouped_linear_bytes(out_features: int, in_features: int, bits: int, group_size: int, g_idx: bool) -> int:
    groups = -(-in_features // group_size) if group_size > 0 else 1
    codes = out_features * in_features * bits // 8
    zeros = groups * out_features * bits // 8
    scales = groups * out_features * 2
    return codes + zeros + scales + (4 * in_features if g_idx else 0)


def linear_bytes(shape: tuple[int, int], precision: Precision) -> int:
    out_features, in_features = shape
    method = precision.quantization
    if method == "nf4":
        return nf4_linear_bytes(out_features, in_features)
    if method == "int8":
        return int8_linear_bytes(out_features, in_features)
    if method in ("awq", "gptq"):
        return grouped_linear_bytes(out_features, in_features, precision.bits, precision.group_size, method == "gptq")
    if method == "fp8":
        return out_features * in_features + 4
    raise ValueError(f"no quantized layout for {method!r}")


def param_bytes_in_dtype(fp32: bool, fp32_strict: bool, precision: Precision) -> int:
    if fp32_strict and precision.dtype in ("float16", "bfloat16"):
        return 4
    if fp32 and precision.dtype == "float16":
        return 4
    return precision.dtype_bytes


def block_bytes(block: Block, precision: Precision) -> int:
    total = 0
    for param in block.params:
        if precision.quantization is not None and param.quantized and param.linear is not None:
            total += linear_bytes(param.linear, precision)
        else:
            total += param.numel * param_bytes_in_dtype(param.fp32, param.fp32_strict, precision)
    return total


def accelerate_block_size(block: Block, precision: Precision) -> int:
    """The size accelerate's device map assigns to a block: quantized weights at the quantizer's
    ``quantized_element_size`` (0.5 byte for 4-bit, 1 for int8), without their quant state."""
    element = {"nf4": 0.5, "int8": 1.0}.get(precision.quantization or "")
    if element is None:
        return block_bytes(block, precision)
    total = 0.0
    for param in block.params:
        if param.quantized and param.linear is not None:
            total += param.numel * element
        else:
            total += param.numel * param_bytes_in_dtype(param.fp32, param.fp32_strict, precision)
    return int(total)


def weight_bytes(facts: ModelFacts, precision: Precision) -> int:
    """Every parameter and buffer of the model in ``precision``, quant states included."""
    return sum(block_bytes(b, precision) for b in facts.blocks) + facts.buffer_bytes


def checkpoint_precision(facts: ModelFacts, dtype: str) -> Precision | None:
    """The precision a pre-quantized checkpoint (AWQ, GPTQ, FP8 ``quantization_config``) loads in; None for
    a checkpoint of plain floats (bitsandbytes checkpoints are planned as the quantization they name)."""
    config = facts.quantization_config or {}
    method = str(config.get("quant_method", "")).lower()
    if method in ("awq", "gptq"):
        return Precision(dtype, method, int(config.get("bits", 4)), int(config.get("group_size", 128) or -1))
    if method == "fp8":
        return Precision(dtype, "fp8")
    if method == "bitsandbytes":
        return Precision(dtype, "int8" if config.get("load_in_8bit") else "nf4")
    return None
