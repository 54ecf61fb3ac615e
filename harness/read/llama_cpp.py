"""A reader running a GGUF through llama.cpp (xllamacpp) in this process.

The prompt is rendered and counted with the Hugging Face tokenizer and sent to llama.cpp as token ids,
so the counted prompt is exactly what the model reads.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from harness.backends.gguf_weights import GgufWeights
from harness.backends.llama_cpp import LlamaCppGenerator, LlamaCppSettings
from harness.backends.loading import ModelSpec
from harness.read.local import LocalReader


class LlamaCppReader(LocalReader):
    """``gguf`` (a .gguf path) or ``offline_model`` names the weights; ``tokenizer`` (a folder) the
    tokenizer when not the offline model's; ``llama_cpp`` the engine settings
    (:class:`harness.backends.llama_cpp.LlamaCppSettings`)."""

    backend = "llama_cpp"
    engine_quantization = "a llama_cpp reader reads the GGUF's own quantization"
    # The llama.cpp server lives in this process and cannot be pickled into spawned ones.
    engine_devices = "the llama_cpp backend runs in one process; use reader.llama_cpp.n_parallel for parallel decoding"

    def __init__(
        self,
        name: str,
        gguf: str | None = None,
        tokenizer: str | None = None,
        llama_cpp: Mapping[str, Any] | None = None,
        **settings: Any,
    ) -> None:
        self.gguf = None if gguf is None else str(gguf)
        self.tokenizer_path = None if tokenizer is None else str(tokenizer)
        super().__init__(name, **settings)
        self.llama_cpp = LlamaCppSettings.from_mapping(llama_cpp)  # unknown keys fail here
        self._gguf_identity: str | None = None

    def check_weights(self, spec: ModelSpec, name: str) -> None:
        if spec.offline_model is None and not self.gguf:
            raise ValueError(f"reader {name!r}: the llama_cpp backend needs `gguf` (a .gguf path) or `offline_model`")
        if self.gguf and spec.offline_model is not None:
            raise ValueError(f"reader {name!r}: set `gguf` (a .gguf path) or `offline_model`, not both")

    @property
    def model_id(self) -> str:
        if self.spec.offline_model:
            return self.spec.source
        return f"gguf:{Path(str(self.gguf)).name}"

    @property
    def reader_id(self) -> str:
        # Slots share each forward pass, so the slot count can move last-bit logits: it is part of the id.
        return (
            f"{self.model_id}|backend={self.backend}|{self.gguf_identity}"
            f"|decode=greedy|max_new_tokens={self.max_new_tokens}|{self.llama_cpp.identity}"
        )

    @property
    def weights_format(self) -> str:
        """``gguf-<quantization>``: llama.cpp computes with the GGUF's own block formats."""
        return "gguf-" + self.gguf_identity.rsplit("|quant=", 1)[-1]

    @property
    def dtype_name(self) -> str:
        return "gguf"

    @property
    def gguf_weights(self) -> GgufWeights:
        return GgufWeights(self.gguf, self.spec.offline_model, self.spec.models_dir, self.tokenizer_path)

    @property
    def gguf_file(self) -> Path:
        """The GGUF this reader runs: ``gguf`` when set, else the offline model's file."""
        return self.gguf_weights.file

    @property
    def gguf_identity(self) -> str:
        """``gguf=<file name>:<sha256>|quant=<format>``. A ladder model's sha256 is the recorded one its
        assembly was verified against (so the id needs no file); any other GGUF is hashed once per process."""
        if self._gguf_identity is None:
            self._gguf_identity = self.gguf_weights.identity()
        return self._gguf_identity

    def load_tokenizer(self):
        """``tokenizer`` when set; else the offline model's tokenizer folder (converted from its GGUF
        once and kept); else the GGUF file itself (read on every load)."""
        return self.gguf_weights.load_tokenizer()

    def build_module(self):
        generator = LlamaCppGenerator(
            self.gguf_file, self.tokenizer, self.max_new_tokens, self.llama_cpp, self.add_special_tokens
        )
        return self.engine_module(generator)
