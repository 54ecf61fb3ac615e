"""The chat-LM interface trees call (summaries, question classes, tables of contents) and its cache.

A ``ChatLM`` answers a batch of single-turn prompts: each prompt is one user message; the system
prompt comes from the backend's config. Every backend caches each response, in memory and (with a
``cache_dir``) in a ``TextStore``, keyed by (backend, model, system prompt, prompt, max_new_tokens):
a rerun, or another tree over the same document, pays only for prompts never answered before.
"""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any

from harness.backends.response_cache import ResponseCache
from harness.cache import TextStore, stable_hash
from harness.core.protocols import ChatLM

__all__ = ["CACHE_FILE", "CachedChatLM", "ChatLM", "build_chat_lm"]

log = logging.getLogger(__name__)

CACHE_FILE = "lm_responses.sqlite"


class CachedChatLM(ABC):
    """Base of the real backends: validation, the response cache and call counters.

    ``calls`` counts prompts actually sent to the model (cache misses), ``requests`` every prompt asked,
    ``prompt_tokens`` the model's input tokens of the prompts sent (each backend's ``_generate`` adds
    them: rendered chat prompt, special tokens included, padding excluded).
    """

    backend: str = "chat"

    def __init__(self, name: str, model_id: str, system_prompt: str = "", cache_dir: str | Path | None = None) -> None:
        self.name = name
        self.model_id = model_id
        self.system_prompt = system_prompt or ""
        self.cache = TextStore(Path(cache_dir) / CACHE_FILE, table="lm_responses") if cache_dir else None
        # The backend code (harness/lm and what it imports) is part of the answer's identity.
        self.response_cache: ResponseCache[str] = ResponseCache(
            self.cache,
            memory=True,
            identity=lambda: (self.backend, self.model_id, self.system_prompt),
            stage="lm",
        )
        self.calls = 0
        self.requests = 0
        self.prompt_tokens = 0

    @property
    def identity(self) -> str:
        """What the response depends on besides the prompt (used in the tree caches' keys)."""
        return f"{self.backend}|{self.model_id}|system={stable_hash(self.system_prompt)[:12]}"

    def cache_key(self, prompt: str, max_new_tokens: int) -> str:
        return self.response_cache.key(prompt, int(max_new_tokens))

    def chat(self, prompts: list[str], max_new_tokens: int) -> list[str]:
        prompts = list(prompts)
        if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, int) or max_new_tokens < 1:
            raise ValueError(f"{self.name}: max_new_tokens must be a positive integer, got {max_new_tokens!r}")
        for i, prompt in enumerate(prompts):
            if not isinstance(prompt, str):
                raise TypeError(f"{self.name}: prompt {i} is {type(prompt).__name__}, not str")
        self.requests += len(prompts)
        if not prompts:
            return []

        def generate(missing: list[str], keys: list[str]) -> dict[str, str]:
            self.calls += len(missing)
            log.debug("%s: generating %d of %d prompts", self.name, len(missing), len(prompts))
            outputs = self._generate(missing, max_new_tokens)
            if len(outputs) != len(missing):
                raise RuntimeError(f"{self.name}: backend returned {len(outputs)} responses for {len(missing)} prompts")
            return {key: str(output) for key, output in zip(keys, outputs, strict=False)}

        found, _ = self.response_cache.responses(prompts, lambda p: self.cache_key(p, max_new_tokens), generate)
        return [str(response) for response in found]

    def save(self, responses: dict[str, str]) -> None:
        """Cache responses by key (backends that answer one prompt at a time save as they go, so a
        failure part-way through a batch loses nothing already paid for)."""
        self.response_cache.put(responses)

    @abstractmethod
    def _generate(self, prompts: list[str], max_new_tokens: int) -> list[str]:
        """Responses for prompts none of which is cached; adds their input tokens to ``prompt_tokens``."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r}, model={self.model_id!r})"


def build_chat_lm(spec: Any) -> ChatLM:
    """A ChatLM from an object that already is one, or from a config with ``_target_`` (dict or DictConfig)."""
    if spec is None:
        raise ValueError("no language model configured: give `lm` (a ChatLM or a config with _target_)")
    if hasattr(spec, "chat") and callable(spec.chat):
        return spec
    from omegaconf import DictConfig

    if isinstance(spec, (dict, DictConfig)):
        if "_target_" not in spec:
            raise ValueError(f"language-model config has no _target_: {dict(spec)!r}")
        from hydra.utils import instantiate

        lm = instantiate(spec)
        if not (hasattr(lm, "chat") and callable(lm.chat)):
            raise TypeError(f"{spec['_target_']} built a {type(lm).__name__}, which has no chat() method")
        return lm
    raise TypeError(f"cannot build a language model from {type(spec).__name__}: {spec!r}")
