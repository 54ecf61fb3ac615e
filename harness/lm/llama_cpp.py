"""A GGUF model through llama.cpp as a ChatLM: the tree's summariser run natively quantised on CPU.

Each prompt is rendered with the Hugging Face tokenizer's chat template (system prompt when set, one
user message, the generation prompt), exactly as :class:`harness.lm.local.LocalChatLM` renders it,
and sent to the llama.cpp server as that tokenizer's ids (``harness.backends.llama_cpp``): what is counted
in ``prompt_tokens`` is what the model reads. Greedy decoding; ``max_new_tokens`` travels with each
request, so summaries (100 tokens) and question classes (8) share one server.

The GGUF and its tokenizer are named like a llama.cpp reader's: ``offline_model`` (``smollm2``,
``qwen2.5-coder-0.5b``, ...) under ``models_dir``, or a ``gguf`` path (with an optional ``tokenizer``
folder). The identity holds the GGUF's sha256 and quantisation, so caches never mix two models.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from harness.backends.gguf_weights import GgufWeights
from harness.backends.llama_cpp import LlamaCppGenerator, LlamaCppSettings
from harness.backends.offline_models import DEFAULT_MODELS_DIR, offline_model_spec
from harness.lm.base import CachedChatLM
from harness.lm.local import render_chat

log = logging.getLogger(__name__)


class LlamaCppChatLM(CachedChatLM):
    """``llama_cpp`` holds the server settings (:class:`LlamaCppSettings`: ``n_ctx`` per slot,
    ``n_parallel``, ``n_threads``, ``n_batch``, ``seed``); ``batch_size`` prompts go to the server per
    request, decoded in ``n_parallel`` slots."""

    backend = "llama_cpp"

    def __init__(
        self,
        offline_model: str | None = "smollm2",
        gguf: str | None = None,
        tokenizer: str | None = None,
        models_dir: str | Path = DEFAULT_MODELS_DIR,
        system_prompt: str = "",
        batch_size: int = 8,
        max_input_tokens: int | None = None,
        llama_cpp: Mapping[str, Any] | None = None,
        cache_dir: str | Path | None = None,
        name: str = "llama-cpp",
    ) -> None:
        if gguf and offline_model is not None:
            raise ValueError(f"{name}: set `gguf` (a .gguf path) or `offline_model`, not both")
        if not gguf and offline_model is None:
            raise ValueError(f"{name}: the llama.cpp chat LM needs `gguf` (a .gguf path) or `offline_model`")
        if offline_model is not None:
            offline_model_spec(offline_model)  # an unknown name fails now, not at first use
        if batch_size < 1:
            raise ValueError(f"{name}: batch_size must be >= 1, got {batch_size}")
        if max_input_tokens is not None and max_input_tokens < 1:
            raise ValueError(f"{name}: max_input_tokens must be >= 1 or null, got {max_input_tokens}")
        self.settings = LlamaCppSettings.from_mapping(llama_cpp)
        self.offline_model = offline_model
        self.gguf = None if not gguf else str(gguf)
        self.tokenizer_path = None if not tokenizer else str(tokenizer)
        self.models_dir = str(models_dir)
        source = f"offline:{offline_model}" if offline_model else f"gguf:{Path(str(gguf)).name}"
        # Slots share each forward pass, so their number can move last-bit logits (as for the reader).
        model_id = (
            f"{source}|{self.gguf_weights.identity()}|decode=greedy|{self.settings.identity}|max_in={max_input_tokens}"
        )
        super().__init__(name=name, model_id=model_id, system_prompt=system_prompt, cache_dir=cache_dir)
        self.batch_size = int(batch_size)
        self.max_input_tokens = max_input_tokens
        self._tokenizer = None
        self._generator: LlamaCppGenerator | None = None

    @property
    def gguf_weights(self) -> GgufWeights:
        return GgufWeights(self.gguf, self.offline_model, self.models_dir, self.tokenizer_path)

    @property
    def gguf_file(self) -> Path:
        return self.gguf_weights.file

    @property
    def tokenizer(self):
        if self._tokenizer is None:
            self._tokenizer = self.gguf_weights.load_tokenizer()
        return self._tokenizer

    @property
    def generator(self) -> LlamaCppGenerator:
        """The llama.cpp server (started on first generation, then kept for every call)."""
        if self._generator is None:
            tokenizer = self.tokenizer
            # A rendered chat prompt already holds its special tokens; a plain one gets the tokenizer's own.
            add_special = not bool(getattr(tokenizer, "chat_template", None))
            # max_new_tokens is only the default: every request sends its own.
            self._generator = LlamaCppGenerator(self.gguf_file, tokenizer, 1, self.settings, add_special)
        return self._generator

    def render(self, prompt: str) -> str:
        """The full model input for one user prompt (chat template when the tokenizer has one)."""
        return render_chat(self.tokenizer, self.system_prompt, prompt, self.max_input_tokens)

    def encode(self, prompts: list[str], max_new_tokens: int) -> list[list[int]]:
        """The token ids llama.cpp reads for each prompt (refused when one does not fit ``n_ctx``)."""
        return self.generator.encode([self.render(p) for p in prompts], max_new_tokens)

    def _generate(self, prompts: list[str], max_new_tokens: int) -> list[str]:
        outputs: list[str] = []
        for start in range(0, len(prompts), self.batch_size):
            batch = prompts[start : start + self.batch_size]
            ids = self.encode(batch, max_new_tokens)
            texts = [text.strip() for text in self.generator.generate_ids(ids, max_new_tokens)]
            self.prompt_tokens += sum(len(x) for x in ids)
            # Saved batch by batch: a failure part-way through loses nothing already generated.
            self.save({self.cache_key(p, max_new_tokens): t for p, t in zip(batch, texts, strict=True)})
            outputs.extend(texts)
        return outputs

    def close(self) -> None:
        if self._generator is not None:
            self._generator.close()
            self._generator = None
