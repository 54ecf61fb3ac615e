"""The GGUF a llama.cpp model runs and its tokenizer, named the same way by the reader and the chat LM.

``gguf`` (a .gguf path) or ``offline_model`` (a packaged model under ``models_dir``) names the weights,
``tokenizer`` (a folder) the tokenizer when it is not the offline model's. The llama.cpp reader
(``harness.read.llama_cpp``) and chat LM (``harness.lm.llama_cpp``) both resolve these four settings into
the file, its identity and the tokenizer here, so the two always run the same weights for the same names.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from harness.backends.llama_cpp import gguf_identity, gguf_tokenizer_source, load_gguf_tokenizer, resolve_gguf


@dataclass(frozen=True)
class GgufWeights:
    gguf: str | None
    offline_model: str | None
    models_dir: str | Path
    tokenizer: str | None = None

    @property
    def file(self) -> Path:
        """``gguf`` when set, else the offline model's file."""
        return resolve_gguf(self.gguf, self.offline_model, self.models_dir)

    def identity(self) -> str:
        """``gguf=<file name>:<sha256>|quant=<format>`` (:func:`harness.backends.llama_cpp.gguf_identity`)."""
        return gguf_identity(self.gguf, self.offline_model, self.models_dir)

    def load_tokenizer(self):
        """The Hugging Face tokenizer, from where :func:`harness.backends.llama_cpp.gguf_tokenizer_source` says."""
        source = gguf_tokenizer_source(self.tokenizer, self.gguf, self.offline_model, self.models_dir)
        return load_gguf_tokenizer(source)
