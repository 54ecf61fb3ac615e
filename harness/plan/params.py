"""Exact parameter counts from a ``config.json``: the model is built on the meta device (no weights, no memory)
and every parameter is listed with what a quantizer does to it.

Which Linear weights bitsandbytes quantizes is decided by transformers' own rule
(``transformers.quantizers.base.get_keys_to_not_convert`` and ``should_convert_module``): every
``nn.Linear`` except the output embedding (``lm_head``), tied weights and the module holding the last
parameter, plus the model's ``_keep_in_fp32_modules``. Biases are never quantized.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Param:
    name: str
    numel: int
    linear: tuple[int, int] | None  # (out_features, in_features) when this is a Linear layer's weight
    quantized: bool  # a Linear weight that bitsandbytes, AWQ and GPTQ store in low precision
    fp32: bool = False  # kept in float32 when the model runs in float16 (_keep_in_fp32_modules)
    fp32_strict: bool = False  # kept in float32 in float16 and bfloat16 (_keep_in_fp32_modules_strict)


@dataclass(frozen=True)
class Block:
    """What accelerate places on one device as a unit: a decoder layer, or a module outside the layers."""

    name: str
    params: tuple[Param, ...]
    is_layer: bool

    @property
    def numel(self) -> int:
        return sum(p.numel for p in self.params)


@dataclass(frozen=True)
class ModelFacts:
    config_path: str
    model_type: str
    architecture: str
    hidden_size: int
    intermediate_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    vocab_size: int
    max_positions: int | None
    tied_embeddings: bool
    config_dtype: str | None
    quantization_config: dict | None
    blocks: tuple[Block, ...]
    buffer_bytes: int
    fused_gate_up: bool = False  # one Linear computes gate and up (Phi-3): its output is twice the MLP width

    @property
    def params(self) -> int:
        return sum(b.numel for b in self.blocks)

    @property
    def quantizable_params(self) -> int:
        return sum(p.numel for b in self.blocks for p in b.params if p.quantized)

    @property
    def largest_linear(self) -> int:
        return max((p.numel for b in self.blocks for p in b.params if p.quantized), default=0)

    @property
    def num_layer_blocks(self) -> int:
        return sum(b.is_layer for b in self.blocks)


def read_config(path: str | Path) -> dict[str, Any]:
    return json.loads(Path(path).read_text())


def _config_object(raw: dict[str, Any]):
    from transformers import AutoConfig
    from transformers.utils import logging as hf_logging

    # The quantization is planned from these keys, not applied; auto_map would ask for remote code.
    values = {k: v for k, v in raw.items() if k not in ("quantization_config", "auto_map", "model_type")}
    model_type = raw.get("model_type")
    if not model_type:
        raise ValueError("config.json has no model_type")
    # Notes on rope settings and deprecated keys concern generation, not sizes, and would bury the plan.
    verbosity = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()
    try:
        return AutoConfig.for_model(model_type, **values)
    except (KeyError, ValueError) as error:
        raise ValueError(f"transformers does not know model_type {model_type!r}: {error}") from error
    finally:
        hf_logging.set_verbosity(verbosity)


def _meta_model(config):
    from accelerate import init_empty_weights
    from transformers import AutoModelForCausalLM, AutoModelForSeq2SeqLM

    model_class = AutoModelForSeq2SeqLM if getattr(config, "is_encoder_decoder", False) else AutoModelForCausalLM
    with init_empty_weights(include_buffers=True):
        return model_class.from_config(config)


def _skip_patterns(model) -> list[str]:
    """transformers' list of modules bitsandbytes leaves unquantized; a fallback for older versions."""
    keep = set(getattr(model, "_keep_in_fp32_modules", None) or ())
    try:
        from transformers.quantizers.base import get_keys_to_not_convert

        return sorted(set(get_keys_to_not_convert(model)) | keep)
    except (ImportError, AttributeError):
        output = model.get_output_embeddings()
        names = {n for n, m in model.named_modules() if output is not None and m is output}
        last = [n for n, _ in model.named_parameters()][-1].rsplit(".", 1)[0]
        return sorted(names | {last} | keep)


def _should_convert(name: str, patterns: list[str]) -> bool:
    try:
        from transformers.quantizers.quantizers_utils import should_convert_module

        return should_convert_module(name, patterns)
    except ImportError:
        return not any(name == p or name.startswith(p + ".") or name.endswith(p) for p in patterns)


def _matches(module_name: str, patterns) -> bool:
    return any(module_name == p or module_name.endswith("." + p) or f".{p}." in f".{module_name}." for p in patterns)


def _layer_prefixes(model) -> list[str]:
    """Module names of the blocks accelerate never splits (the decoder layers)."""
    no_split = set(getattr(model, "_no_split_modules", None) or ())
    return [name for name, module in model.named_modules() if name and type(module).__name__ in no_split]


def _linear_modules(model) -> dict[str, tuple[int, int]]:
    import torch.nn as nn

    try:
        from transformers.pytorch_utils import Conv1D
    except ImportError:  # pragma: no cover - every supported transformers has it
        Conv1D = ()  # noqa: N806
    found = {}
    for name, module in model.named_modules():
        if type(module) is nn.Linear:
            found[name] = (module.out_features, module.in_features)
        elif Conv1D and isinstance(module, Conv1D):
            in_features, out_features = module.weight.shape
            found[name] = (out_features, in_features)
    return found


@cache
def _facts(path: str, _mtime_ns: int) -> ModelFacts:
    raw = read_config(path)
    config = _config_object(raw)
    model = _meta_model(config)
    patterns = _skip_patterns(model)
    linears = _linear_modules(model)
    layers = _layer_prefixes(model)
    keep = set(getattr(model, "_keep_in_fp32_modules", None) or ())
    keep_strict = set(getattr(model, "_keep_in_fp32_modules_strict", None) or ())

    grouped: dict[str, list[Param]] = {}
    for name, param in model.named_parameters():
        module_name, _, leaf = name.rpartition(".")
        block = next((p for p in layers if module_name == p or module_name.startswith(p + ".")), module_name)
        shape = linears.get(module_name) if leaf == "weight" else None
        grouped.setdefault(block, []).append(
            Param(
                name=name,
                numel=param.numel(),
                linear=shape,
                quantized=shape is not None and _should_convert(module_name, patterns),
                fp32=_matches(module_name, keep),
                fp32_strict=_matches(module_name, keep_strict),
            )
        )
    blocks = tuple(Block(name, tuple(params), name in layers) for name, params in grouped.items())
    buffer_bytes = sum(b.numel() * b.element_size() for b in model.buffers())

    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    heads = int(text.num_attention_heads)
    hidden = int(text.hidden_size)
    head_dim = getattr(text, "head_dim", None) or getattr(text, "d_kv", None) or hidden // heads
    kv_heads = getattr(text, "num_key_value_heads", None) or heads
    layers_count = getattr(text, "num_decoder_layers", None) or text.num_hidden_layers
    intermediate = getattr(text, "intermediate_size", None) or getattr(text, "d_ff", None) or 4 * hidden
    dtype = raw.get("torch_dtype") or raw.get("dtype")
    fused = any(shape[0] == 2 * int(intermediate) for shape in linears.values())
    return ModelFacts(
        config_path=path,
        model_type=str(raw["model_type"]),
        architecture=type(model).__name__,
        hidden_size=hidden,
        intermediate_size=int(intermediate),
        num_layers=int(layers_count),
        num_heads=heads,
        num_kv_heads=int(kv_heads),
        head_dim=int(head_dim),
        vocab_size=int(text.vocab_size),
        max_positions=getattr(text, "max_position_embeddings", None),
        tied_embeddings=bool(getattr(text, "tie_word_embeddings", False)),
        config_dtype=str(dtype) if dtype else None,
        quantization_config=raw.get("quantization_config"),
        blocks=blocks,
        buffer_bytes=int(buffer_bytes),
        fused_gate_up=fused,
    )


def model_facts(config_path: str | Path) -> ModelFacts:
    """The counts for one ``config.json``, computed once per process and file version."""
    path = Path(config_path).resolve()
    return _facts(str(path), path.stat().st_mtime_ns)
