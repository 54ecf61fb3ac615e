"""The HTTP side of OpenAI-compatible servers (OpenAI, vLLM, TGI, SGLang, llama.cpp), shared by the
summary-tree chat LM and the server reader.

``POST {base_url}/{path}`` with ``httpx``; retries with exponential backoff on 429, 5xx, timeouts and
dropped connections (a ``Retry-After`` header, when sent, sets the wait instead); a minimum interval
between requests keeps under a server's rate limit. The client is safe to share between threads: the
reader sends several requests at once, and the rate limit and counters hold across them.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from typing import Any

import httpx

log = logging.getLogger(__name__)

RETRY_STATUSES = frozenset({408, 409, 429, 500, 502, 503, 504})
# Timeouts a long generation or a busy local pool causes on a live server; a connect timeout is not among them.
SLOW_NOT_DOWN = (httpx.ReadTimeout, httpx.WriteTimeout, httpx.PoolTimeout)


class ServerRequestError(RuntimeError):
    """A request the server refused for good, or that kept failing past the retry limit."""


class ServerUnavailableError(ServerRequestError):
    """Retries ran out on a server that stopped answering: its connection failed (refused, reset, dropped)
    or it kept answering 5xx. Unlike a refusal (4xx) or a read timeout, which a slow prompt causes on any
    server, this says the server is down, so the prompt may be sent to another server of the same model."""


class OpenAICompatClient:
    """JSON ``POST`` requests to one OpenAI-compatible server, with retries and a rate limit.

    ``http_requests`` counts attempts sent (retries included), ``retries`` the failed attempts retried.
    """

    def __init__(
        self,
        base_url: str,
        api_key_env: str | None = None,
        timeout_s: float = 60.0,
        max_retries: int = 6,
        backoff_s: float = 1.0,
        max_backoff_s: float = 60.0,
        min_interval_s: float = 0.0,
        name: str = "openai",
        sleep: Callable[[float], None] = time.sleep,
        max_connections: int = 16,
    ) -> None:
        for field, value in (("timeout_s", timeout_s), ("backoff_s", backoff_s), ("max_backoff_s", max_backoff_s)):
            if value <= 0:
                raise ValueError(f"{name}: {field} must be > 0, got {value}")
        if min_interval_s < 0:
            raise ValueError(f"{name}: min_interval_s must be >= 0, got {min_interval_s}")
        if max_retries < 0:
            raise ValueError(f"{name}: max_retries must be >= 0, got {max_retries}")
        if not str(base_url).startswith(("http://", "https://")):
            raise ValueError(f"{name}: base_url must start with http:// or https://, got {base_url!r}")
        self.base_url = str(base_url).rstrip("/")
        self.api_key_env = api_key_env
        self.timeout_s = float(timeout_s)
        self.max_retries = int(max_retries)
        self.backoff_s = float(backoff_s)
        self.max_backoff_s = float(max_backoff_s)
        self.min_interval_s = float(min_interval_s)
        self.name = name
        self.max_connections = int(max_connections)
        self._sleep = sleep
        self._lock = threading.Lock()
        self._last_request = -float("inf")
        self._client: httpx.Client | None = None
        self.retries = 0
        self.http_requests = 0

    def headers(self) -> dict[str, str]:
        headers = {"Content-Type": "application/json"}
        if self.api_key_env:
            key = os.environ.get(self.api_key_env)
            if not key:
                raise ServerRequestError(
                    f"{self.name}: environment variable {self.api_key_env!r} holding the API key is not set "
                    "(set api_key_env=null for a server that needs no key)"
                )
            headers["Authorization"] = f"Bearer {key}"
        return headers

    @property
    def client(self) -> httpx.Client:
        with self._lock:
            if self._client is None:
                limits = httpx.Limits(
                    max_connections=self.max_connections, max_keepalive_connections=self.max_connections
                )
                self._client = httpx.Client(timeout=self.timeout_s, limits=limits)
            return self._client

    def close(self) -> None:
        with self._lock:
            if self._client is not None:
                self._client.close()
                self._client = None

    def _wait_for_slot(self) -> None:
        # The slot is claimed under the lock before sleeping, so concurrent senders queue up one
        # interval apart instead of all waking at the same instant.
        with self._lock:
            now = time.monotonic()
            start = max(now, self._last_request + self.min_interval_s)
            self._last_request = start
            self.http_requests += 1
        if start > now:
            self._sleep(start - now)

    def _backoff(self, attempt: int, response: httpx.Response | None) -> float:
        if response is not None:
            retry_after = response.headers.get("retry-after")
            if retry_after is not None:
                try:
                    return min(max(float(retry_after), 0.0), self.max_backoff_s)
                except ValueError:
                    pass  # an HTTP date: fall back to exponential backoff
        return min(self.backoff_s * 2**attempt, self.max_backoff_s)

    def post(self, path: str, payload: dict[str, Any]) -> dict[str, Any]:
        """The JSON body of a 200 answer to ``POST {base_url}/{path}``, retrying transient failures."""
        url = f"{self.base_url}/{path.lstrip('/')}"
        headers = self.headers()
        last_error = ""
        down = False  # whether the last failure says the server is down rather than slow or overloaded
        for attempt in range(self.max_retries + 1):
            self._wait_for_slot()
            response = None
            try:
                response = self.client.post(url, json=payload, headers=headers)
            except (httpx.TimeoutException, httpx.TransportError) as exc:
                last_error = f"{type(exc).__name__}: {exc}"
                down = not isinstance(exc, SLOW_NOT_DOWN)
            else:
                if response.status_code == 200:
                    try:
                        data = response.json()
                    except ValueError as exc:
                        raise ServerRequestError(
                            f"{self.name}: malformed response from {url} (not JSON): {response.text[:300]}"
                        ) from exc
                    if not isinstance(data, dict):
                        raise ServerRequestError(f"{self.name}: malformed response from {url}: {response.text[:300]}")
                    return data
                last_error = f"HTTP {response.status_code}: {response.text[:300]}"
                down = response.status_code >= 500
                if response.status_code not in RETRY_STATUSES:
                    raise ServerRequestError(f"{self.name}: {url} refused the request ({last_error})")
            if attempt == self.max_retries:
                break
            delay = self._backoff(attempt, response)
            with self._lock:
                self.retries += 1
            log.warning("%s: attempt %d failed (%s); retrying in %.1f s", self.name, attempt + 1, last_error, delay)
            self._sleep(delay)
        error = ServerUnavailableError if down else ServerRequestError
        raise error(f"{self.name}: {url} failed after {self.max_retries + 1} attempts ({last_error})")


def first_choice(data: dict[str, Any], field: str, name: str) -> tuple[str, dict[str, Any]]:
    """The text of ``choices[0]`` (``field`` is ``"text"`` for completions, ``"message"`` for chat) and
    the response's ``usage`` block (empty when the server sends none)."""
    try:
        choice = data["choices"][0]
        value = choice["message"].get("content") if field == "message" else choice[field]
    except (KeyError, IndexError, TypeError, AttributeError) as exc:
        raise ServerRequestError(
            f"{name}: malformed response ({type(exc).__name__}: no choices[0].{field}): {str(data)[:300]}"
        ) from exc
    usage = data.get("usage")
    return str(value or ""), usage if isinstance(usage, dict) else {}
