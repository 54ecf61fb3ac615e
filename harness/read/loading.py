"""Loading a reader model and its tokenizer from a hub id, a local folder or a packaged offline model."""

from __future__ import annotations

import logging
from pathlib import Path

import torch

from harness.read.offline_models import DEFAULT_MODELS_DIR, default_folder, ensure_offline_model

log = logging.getLogger(__name__)

DTYPES = {
    "bfloat16": torch.bfloat16,
    "bf16": torch.bfloat16,
    "float16": torch.float16,
    "fp16": torch.float16,
    "float32": torch.float32,
    "fp32": torch.float32,
}
QUANTIZATIONS = (None, "nf4", "int8")


def resolve_dtype(dtype: str | torch.dtype) -> torch.dtype | str:
    """A torch dtype from its name; ``"auto"`` is passed through (the checkpoint's own dtype)."""
    if isinstance(dtype, torch.dtype) or dtype == "auto":
        return dtype
    if dtype not in DTYPES:
        raise ValueError(f"unknown dtype {dtype!r}; choose one of {sorted(DTYPES)} or 'auto'")
    return DTYPES[dtype]


def resolve_pretrained(
    pretrained: str | None,
    offline_model: str | None = None,
    models_dir: str | Path = DEFAULT_MODELS_DIR,
) -> str:
    """The path or hub id to load; an offline model is converted into its folder first if needed."""
    if offline_model is not None:
        folder = Path(pretrained) if pretrained else default_folder(offline_model, models_dir)
        return str(ensure_offline_model(offline_model, folder, models_dir))
    if not pretrained:
        raise ValueError("a reader needs `pretrained` (hub id or local path) or `offline_model`")
    return str(pretrained)


def is_encoder_decoder(path: str, trust_remote_code: bool = False) -> bool:
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(path, trust_remote_code=trust_remote_code)
    return bool(getattr(config, "is_encoder_decoder", False))


def load_tokenizer(
    pretrained: str | None,
    trust_remote_code: bool = False,
    offline_model: str | None = None,
    models_dir: str | Path = DEFAULT_MODELS_DIR,
):
    """The reader's tokenizer alone (no weights), left-padded for causal LMs, with a pad token."""
    from transformers import AutoTokenizer

    path = resolve_pretrained(pretrained, offline_model, models_dir)
    tokenizer = AutoTokenizer.from_pretrained(path, trust_remote_code=trust_remote_code)
    if not is_encoder_decoder(path, trust_remote_code):
        # Generation appends to the right end of every row, so prompts must end flush right.
        tokenizer.padding_side = "left"
    if tokenizer.pad_token is None:
        if tokenizer.eos_token is None:
            raise ValueError(f"tokenizer of {path!r} has neither a pad nor an eos token to pad with")
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def quantization_config(quantization: str | None, compute_dtype: torch.dtype | str):
    if quantization not in QUANTIZATIONS:
        raise ValueError(f"unknown quantization {quantization!r}; choose one of {QUANTIZATIONS}")
    if quantization is None:
        return None
    from transformers import BitsAndBytesConfig

    if quantization == "int8":
        return BitsAndBytesConfig(load_in_8bit=True)
    return BitsAndBytesConfig(
        load_in_4bit=True,
        bnb_4bit_quant_type="nf4",
        bnb_4bit_compute_dtype=compute_dtype if isinstance(compute_dtype, torch.dtype) else torch.bfloat16,
        bnb_4bit_use_double_quant=True,
    )


def default_device_map(quantization: str | None, device_map: str | dict | None):
    """bitsandbytes places weights at load time, so a quantized model always gets a device map."""
    if device_map is not None or quantization is None:
        return device_map
    return "auto" if torch.cuda.is_available() else "cpu"


def load_reader(
    pretrained: str | None,
    dtype: str | torch.dtype = "bfloat16",
    quantization: str | None = None,
    device_map: str | dict | None = None,
    trust_remote_code: bool = False,
    offline_model: str | None = None,
    models_dir: str | Path = DEFAULT_MODELS_DIR,
):
    """(model, tokenizer) in eval mode: a causal LM, or a seq2seq LM when the config is encoder-decoder."""
    from transformers import AutoModelForCausalLM, AutoModelForSeq2SeqLM

    path = resolve_pretrained(pretrained, offline_model, models_dir)
    torch_dtype = resolve_dtype(dtype)
    seq2seq = is_encoder_decoder(path, trust_remote_code)
    model_class = AutoModelForSeq2SeqLM if seq2seq else AutoModelForCausalLM
    kwargs = {"dtype": torch_dtype, "trust_remote_code": trust_remote_code}
    quant = quantization_config(quantization, torch_dtype)
    if quant is not None:
        kwargs["quantization_config"] = quant
    placement = default_device_map(quantization, device_map)
    if placement is not None:
        kwargs["device_map"] = placement
    log.info("loading reader %s (%s, dtype=%s, quantization=%s, device_map=%s)",
             path, model_class.__name__, dtype, quantization, placement)
    model = model_class.from_pretrained(path, **kwargs)
    model.eval()
    tokenizer = load_tokenizer(path, trust_remote_code=trust_remote_code)
    return model, tokenizer
