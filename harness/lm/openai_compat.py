"""An OpenAI-compatible chat-completions client as a ChatLM (OpenAI, vLLM, llama.cpp, any such server).

``POST {base_url}/chat/completions`` with ``httpx``; retries with exponential backoff on 429, 5xx,
timeouts and dropped connections (a ``Retry-After`` header, when sent, sets the wait instead); a
minimum interval between requests keeps under a server's rate limit. Prompts are sent one request at
a time, in order, so the rate limit is exact and a failure names the prompt that failed.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from harness.cache import stable_hash
from harness.lm.base import CachedChatLM

log = logging.getLogger(__name__)

RETRY_STATUSES = frozenset({408, 409, 429, 500, 502, 503, 504})


class ChatCompletionError(RuntimeError):
    """A request the server refused for good, or that kept failing past the retry limit."""


class OpenAIChatLM(CachedChatLM):
    backend = "openai-chat"

    def __init__(
        self,
        model: str = "gpt-4o-mini",
        base_url: str = "https://api.openai.com/v1",
        api_key_env: str | None = "OPENAI_API_KEY",
        system_prompt: str = "",
        temperature: float = 0.0,
        timeout_s: float = 60.0,
        max_retries: int = 6,
        backoff_s: float = 1.0,
        max_backoff_s: float = 60.0,
        min_interval_s: float = 0.0,
        max_tokens_field: str = "max_tokens",
        extra_body: dict[str, Any] | None = None,
        cache_dir: str | Path | None = None,
        name: str = "openai",
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        for field, value in (("timeout_s", timeout_s), ("backoff_s", backoff_s), ("max_backoff_s", max_backoff_s)):
            if value <= 0:
                raise ValueError(f"{name}: {field} must be > 0, got {value}")
        if min_interval_s < 0:
            raise ValueError(f"{name}: min_interval_s must be >= 0, got {min_interval_s}")
        if max_retries < 0:
            raise ValueError(f"{name}: max_retries must be >= 0, got {max_retries}")
        self.base_url = base_url.rstrip("/")
        model_id = f"{model}@{self.base_url}|temperature={float(temperature)}"
        if extra_body:
            model_id += f"|extra={stable_hash(dict(extra_body))[:12]}"
        super().__init__(name=name, model_id=model_id, system_prompt=system_prompt, cache_dir=cache_dir)
        self.model = model
        self.api_key_env = api_key_env
        self.temperature = float(temperature)
        self.timeout_s = float(timeout_s)
        self.max_retries = int(max_retries)
        self.backoff_s = float(backoff_s)
        self.max_backoff_s = float(max_backoff_s)
        self.min_interval_s = float(min_interval_s)
        self.max_tokens_field = max_tokens_field
        self.extra_body = dict(extra_body or {})
        self._sleep = sleep
        self._last_request = -float("inf")
        self._client: httpx.Client | None = None
        self.retries = 0  # failed attempts that were retried
        self.http_requests = 0  # attempts sent, retries included

    def _headers(self) -> dict[str, str]:
        headers = {"Content-Type": "application/json"}
        if self.api_key_env:
            key = os.environ.get(self.api_key_env)
            if not key:
                raise ChatCompletionError(
                    f"{self.name}: environment variable {self.api_key_env!r} holding the API key is not set "
                    "(set api_key_env=null for a server that needs no key)"
                )
            headers["Authorization"] = f"Bearer {key}"
        return headers

    @property
    def client(self) -> httpx.Client:
        if self._client is None:
            self._client = httpx.Client(timeout=self.timeout_s)
        return self._client

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

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

    def _wait_for_slot(self) -> None:
        wait = self._last_request + self.min_interval_s - time.monotonic()
        if wait > 0:
            self._sleep(wait)
        self._last_request = time.monotonic()

    def _backoff(self, attempt: int, response: httpx.Response | None) -> float:
        if response is not None:
            retry_after = response.headers.get("retry-after")
            if retry_after is not None:
                try:
                    return min(max(float(retry_after), 0.0), self.max_backoff_s)
                except ValueError:
                    pass  # an HTTP date: fall back to exponential backoff
        return min(self.backoff_s * 2**attempt, self.max_backoff_s)

    def complete(self, prompt: str, max_new_tokens: int) -> str:
        """One chat completion, uncached, with retries."""
        url = f"{self.base_url}/chat/completions"
        payload = self._payload(prompt, max_new_tokens)
        headers = self._headers()
        last_error = ""
        for attempt in range(self.max_retries + 1):
            self._wait_for_slot()
            self.http_requests += 1
            response = None
            try:
                response = self.client.post(url, json=payload, headers=headers)
            except (httpx.TimeoutException, httpx.TransportError) as exc:
                last_error = f"{type(exc).__name__}: {exc}"
            else:
                if response.status_code == 200:
                    return self._content(response)
                last_error = f"HTTP {response.status_code}: {response.text[:300]}"
                if response.status_code not in RETRY_STATUSES:
                    raise ChatCompletionError(f"{self.name}: {url} refused the request ({last_error})")
            if attempt == self.max_retries:
                break
            delay = self._backoff(attempt, response)
            self.retries += 1
            log.warning("%s: attempt %d failed (%s); retrying in %.1f s", self.name, attempt + 1, last_error, delay)
            self._sleep(delay)
        raise ChatCompletionError(f"{self.name}: {url} failed after {self.max_retries + 1} attempts ({last_error})")

    def _content(self, response: httpx.Response) -> str:
        try:
            data = response.json()
            content = data["choices"][0]["message"].get("content")
        except (ValueError, KeyError, IndexError, TypeError, AttributeError) as exc:
            raise ChatCompletionError(
                f"{self.name}: malformed chat-completions response ({type(exc).__name__}): {response.text[:300]}"
            ) from exc
        return (content or "").strip()

    def _generate(self, prompts: list[str], max_new_tokens: int) -> list[str]:
        outputs = []
        for prompt in prompts:
            outputs.append(self.complete(prompt, max_new_tokens))
            self.save({self.cache_key(prompt, max_new_tokens): outputs[-1]})
        return outputs
