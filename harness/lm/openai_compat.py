"""An OpenAI-compatible chat-completions client as a ChatLM (OpenAI, vLLM, llama.cpp, any such server).

``POST {base_url}/chat/completions`` through the shared ``OpenAICompatClient`` (retries with backoff on
429/5xx, ``Retry-After``, a minimum interval between requests). Prompts are sent one request at a time,
in order, so the rate limit is exact and a failure names the prompt that failed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harness.backends.http import OpenAICompatClient, ServerRequestError, first_choice
from harness.cache import stable_hash
from harness.lm.base import CachedChatLM

CLIENT_DEFAULTS = {"base_url": "https://api.openai.com/v1", "api_key_env": "OPENAI_API_KEY"}

# The chat LM's historical name for the shared error type.
ChatCompletionError = ServerRequestError


class OpenAIChatLM(CachedChatLM):
    backend = "openai-chat"

    def __init__(
        self,
        model: str = "gpt-4o-mini",
        system_prompt: str = "",
        temperature: float = 0.0,
        max_tokens_field: str = "max_tokens",
        extra_body: dict[str, Any] | None = None,
        cache_dir: str | Path | None = None,
        name: str = "openai",
        **client: Any,
    ) -> None:
        """The remaining keyword arguments are the HTTP client's (``OpenAICompatClient``: ``base_url``,
        ``api_key_env``, ``timeout_s``, ``max_retries``, ``backoff_s``, ``max_backoff_s``,
        ``min_interval_s``, ``sleep``); the defaults reach the OpenAI API with ``$OPENAI_API_KEY``."""
        self.http = OpenAICompatClient(**{**CLIENT_DEFAULTS, **client}, name=name)
        self.base_url = self.http.base_url
        model_id = f"{model}@{self.base_url}|temperature={float(temperature)}"
        if extra_body:
            model_id += f"|extra={stable_hash(dict(extra_body))[:12]}"
        super().__init__(name=name, model_id=model_id, system_prompt=system_prompt, cache_dir=cache_dir)
        self.model = model
        self.api_key_env = self.http.api_key_env
        self.temperature = float(temperature)
        self.max_tokens_field = max_tokens_field
        self.extra_body = dict(extra_body or {})

    @property
    def retries(self) -> int:
        """Failed attempts that were retried."""
        return self.http.retries

    @property
    def http_requests(self) -> int:
        """Attempts sent, retries included."""
        return self.http.http_requests

    def close(self) -> None:
        self.http.close()

    def _payload(self, prompt: str, max_new_tokens: int) -> dict[str, Any]:
        messages = [{"role": "system", "content": self.system_prompt}] if self.system_prompt.strip() else []
        messages.append({"role": "user", "content": prompt})
        return {
            "model": self.model,
            "messages": messages,
            self.max_tokens_field: int(max_new_tokens),
            "temperature": self.temperature,
            **self.extra_body,
        }

    def complete(self, prompt: str, max_new_tokens: int) -> str:
        """One chat completion, uncached, with retries."""
        return self._complete(prompt, max_new_tokens)[0]

    def _complete(self, prompt: str, max_new_tokens: int) -> tuple[str, int]:
        """One chat completion and its prompt tokens as the server reports them (``usage.prompt_tokens``).
        A server that reports no usage counts 0: the remote model's tokenizer is not at hand to count
        them here, so ``prompt_tokens`` then undercounts."""
        data = self.http.post("chat/completions", self._payload(prompt, max_new_tokens))
        text = first_choice(data, "message", self.name)[0].strip()
        usage = data.get("usage") if isinstance(data, dict) else None
        tokens = usage.get("prompt_tokens") if isinstance(usage, dict) else None
        return text, tokens if isinstance(tokens, int) and not isinstance(tokens, bool) else 0

    def _generate(self, prompts: list[str], max_new_tokens: int) -> list[str]:
        outputs = []
        for prompt in prompts:
            text, tokens = self._complete(prompt, max_new_tokens)
            self.prompt_tokens += tokens
            outputs.append(text)
            self.save({self.cache_key(prompt, max_new_tokens): outputs[-1]})
        return outputs
