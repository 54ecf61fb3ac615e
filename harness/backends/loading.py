"""Loading a reader model and its tokenizer from a hub id, a local folder or a packaged offline model.

``ModelSpec`` holds the settings that say which weights to load and how; the reader and the tree's local
chat LM build it from the same config keys (``pretrained``, ``offline_model``, ``models_dir``, ``dtype``,
``quantization``, ``device_map``, ``trust_remote_code``, ``kernels``).

Hub kernels stay off unless ``kernels: true`` asks for them: transformers 5.2x turns them on when a load does not
say, and then fetches compiled kernels (``kernels-community/...``) from the hub, which an offline node cannot do
(an NF4 or ``device_map`` load on CUDA failed on the missing rotary kernel), and which change the arithmetic.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

from harness.backends.offline_models import DEFAULT_MODELS_DIR, default_folder, ensure_offline_model, offline_model_spec
from harness.backends.precision import machine_dtype
from harness.backends.tokenizer_files import (
    direct_class_name,
    ensure_pad_token,
    memoized_tokenizer,
    pretrained_tokenizer,
)
from harness.core.max_memory import max_memory_bytes

log = logging.getLogger(__name__)

# Names, not torch dtypes: torch is imported where weights are loaded, so that a run which only renders and
# counts prompts (harness.backends.tokenizer_files) never pays for it.
DTYPES = {
    "bfloat16": "bfloat16",
    "bf16": "bfloat16",
    "float16": "float16",
    "fp16": "float16",
    "float32": "float32",
    "fp32": "float32",
}
QUANTIZATIONS = (None, "nf4", "int8")


def dtype_name(dtype: str | torch.dtype) -> str:
    """The canonical name of a dtype (``bf16`` -> ``bfloat16``); ``"auto"`` is this machine's choice
    (``harness.backends.precision``). Checks a config's dtype without importing torch."""
    if not isinstance(dtype, str):
        return str(dtype).removeprefix("torch.")
    if dtype == "auto":
        dtype = machine_dtype()
    if dtype not in DTYPES:
        raise ValueError(f"unknown dtype {dtype!r}; choose one of {sorted(DTYPES)} or 'auto'")
    return DTYPES[dtype]


def resolve_dtype(dtype: str | torch.dtype) -> torch.dtype:
    """A torch dtype from its name, see :func:`dtype_name`."""
    import torch

    return dtype if isinstance(dtype, torch.dtype) else getattr(torch, dtype_name(dtype))


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
    if direct_class_name(path, trust_remote_code):
        return False  # an offline model's folder: a decoder-only model type (AutoConfig would import torch)
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
    path = resolve_pretrained(pretrained, offline_model, models_dir)

    def load():
        tokenizer = pretrained_tokenizer(path, trust_remote_code)
        if not is_encoder_decoder(path, trust_remote_code):
            # Generation appends to the right end of every row, so prompts must end flush right.
            tokenizer.padding_side = "left"
        return ensure_pad_token(tokenizer, path)

    return memoized_tokenizer(path, load, "transformers", trust_remote_code)


def quantization_config(quantization: str | None, compute_dtype: torch.dtype | str):
    if quantization not in QUANTIZATIONS:
        raise ValueError(f"unknown quantization {quantization!r}; choose one of {QUANTIZATIONS}")
    if quantization is None:
        return None
    import torch
    from transformers import BitsAndBytesConfig

    if quantization == "int8":
        return BitsAndBytesConfig(load_in_8bit=True)
    return BitsAndBytesConfig(
        load_in_4bit=True,
        bnb_4bit_quant_type="nf4",
        bnb_4bit_compute_dtype=compute_dtype if isinstance(compute_dtype, torch.dtype) else torch.bfloat16,
        bnb_4bit_use_double_quant=True,
    )


def default_device_map(quantization: str | None, device_map: str | dict | None, max_memory: Any = None):
    """bitsandbytes places weights at load time, so a quantized model always gets a device map; so does a
    model given ``max_memory`` (which GPUs to spread over, and how much of each)."""
    if device_map is not None or (quantization is None and max_memory is None):
        return device_map
    import torch

    return "auto" if torch.cuda.is_available() else "cpu"


def load_reader(
    pretrained: str | None,
    dtype: str | torch.dtype = "bfloat16",
    quantization: str | None = None,
    device_map: str | dict | None = None,
    trust_remote_code: bool = False,
    offline_model: str | None = None,
    models_dir: str | Path = DEFAULT_MODELS_DIR,
    kernels: bool = False,
    max_memory: Any = None,
):
    """(model, tokenizer) in eval mode: a causal LM, or a seq2seq LM when the config is encoder-decoder."""
    from transformers import AutoModelForCausalLM, AutoModelForSeq2SeqLM

    path = resolve_pretrained(pretrained, offline_model, models_dir)
    torch_dtype = resolve_dtype(dtype)
    seq2seq = is_encoder_decoder(path, trust_remote_code)
    model_class = AutoModelForSeq2SeqLM if seq2seq else AutoModelForCausalLM
    kwargs = {"dtype": torch_dtype, "trust_remote_code": trust_remote_code, "use_kernels": bool(kernels)}
    quant = quantization_config(quantization, torch_dtype)
    if quant is not None:
        kwargs["quantization_config"] = quant
    placement = default_device_map(quantization, device_map, max_memory)
    if placement is not None:
        kwargs["device_map"] = placement
    limits = max_memory_bytes(max_memory)
    if limits is not None and placement not in (None, "cpu"):
        kwargs["max_memory"] = limits
    log.info(
        "loading reader %s (%s, dtype=%s, quantization=%s, device_map=%s, hub kernels=%s)",
        path,
        model_class.__name__,
        dtype,
        quantization,
        placement,
        "on" if kernels else "off",
    )
    model = model_class.from_pretrained(path, **kwargs)
    model.eval()
    tokenizer = load_tokenizer(path, trust_remote_code=trust_remote_code)
    return model, tokenizer


@dataclass(frozen=True)
class ModelSpec:
    """Which weights to load and how: an offline model by name (``pretrained`` then names the folder it
    is converted into) or a hub id / local path, its precision, quantization and placement."""

    pretrained: str | None = None
    offline_model: str | None = None
    models_dir: str = str(DEFAULT_MODELS_DIR)
    dtype: str = "bfloat16"
    quantization: str | None = None
    device_map: str | dict | None = None
    trust_remote_code: bool = False
    kernels: bool = False  # hub kernels (transformers' use_kernels); they change the arithmetic, so keyed
    # GPU index -> bytes a device map may fill (harness.core.max_memory); where layers go, not their arithmetic
    max_memory: Any = None

    def __post_init__(self) -> None:
        # Config values arrive as DictConfig nodes and paths; the identities below need plain strings.
        if self.pretrained is not None:
            object.__setattr__(self, "pretrained", str(self.pretrained))
        object.__setattr__(self, "models_dir", str(self.models_dir))
        if self.offline_model is not None:
            offline_model_spec(self.offline_model)  # an unknown name fails now, not at first use
        dtype_name(self.dtype)  # an unknown dtype fails now
        if not isinstance(self.kernels, bool):
            raise ValueError(f"kernels must be true or false, got {self.kernels!r}")
        if self.quantization not in QUANTIZATIONS:
            raise ValueError(f"unknown quantization {self.quantization!r}; choose one of {QUANTIZATIONS}")
        limits = max_memory_bytes(self.max_memory)  # an unreadable size fails now, naming itself
        # Kept as bytes per GPU in order (hashable, like every other field).
        object.__setattr__(self, "max_memory", tuple(limits.values()) if limits else None)

    @classmethod
    def keys(cls) -> tuple[str, ...]:
        return tuple(f.name for f in fields(cls))

    @classmethod
    def from_config(cls, node: Mapping[str, Any] | None = None, owner: str = "model", **defaults: Any) -> ModelSpec:
        """The spec from a config node's model keys, ``defaults`` filling the keys it leaves out. Any
        other key, and any invalid value, is refused naming itself and ``owner`` (``reader 'x'``)."""
        values = {**defaults, **{str(k): v for k, v in dict(node or {}).items()}}
        unknown = sorted(set(values) - set(cls.keys()))
        if unknown:
            raise TypeError(f"{owner}: unknown model settings {unknown}; allowed {sorted(cls.keys())}")
        try:
            return cls(**values)
        except ValueError as error:
            raise ValueError(f"{owner}: {error}") from error

    @property
    def source(self) -> str:
        """The weights as they enter a cache identity: an offline model by its name (the same on every
        machine, wherever it was converted), else the hub id or path."""
        return f"offline:{self.offline_model}" if self.offline_model else str(self.pretrained)

    @property
    def placed(self) -> bool:
        """Whether the weights are placed at load time (a device map), so Lightning must leave them."""
        return default_device_map(self.quantization, self.device_map, self.max_memory) is not None

    def load(self):
        """(model, tokenizer), see :func:`load_reader`."""
        return load_reader(
            self.pretrained,
            dtype=self.dtype,
            quantization=self.quantization,
            device_map=self.device_map,
            trust_remote_code=self.trust_remote_code,
            offline_model=self.offline_model,
            models_dir=self.models_dir,
            kernels=self.kernels,
            max_memory=self.max_memory,
        )

    def load_tokenizer(self):
        """The tokenizer alone, see :func:`load_tokenizer`."""
        return load_tokenizer(self.pretrained, self.trust_remote_code, self.offline_model, self.models_dir)
