"""A reader served over HTTP by an OpenAI-compatible server (vLLM, TGI, SGLang, llama.cpp's server).

The harness renders and counts every prompt with a local tokenizer (``tokenizer``: a hub id or a local
folder of the served model's tokenizer), so the context budget is measured in that tokenizer's tokens;
point it at the served model's own tokenizer, or the budget counts something else.

``endpoint: completions`` (the default) sends exactly the text that was rendered and counted to
``/v1/completions``; ``endpoint: chat`` sends the request's messages (built from its question and
context, system message included) to ``/v1/chat/completions`` and the server applies its own chat
template, so what the model reads may differ from what was counted. What is sent is a function of the
request alone: nothing is kept between rendering a prompt and sending it.
Each response's ``usage.prompt_tokens`` is compared with the local count, and disagreements are counted
in ``prompt_token_mismatches`` and logged.

Requests run ``concurrency`` at a time from a thread pool over one shared HTTP client (retries with
backoff on 429/5xx honouring ``Retry-After``); each answer is committed to the response cache as it
arrives, so a killed run keeps every answer already received.

``base_urls`` (instead of ``base_url``) names several servers of the same model: prompts are dealt out to
them in turn, ``concurrency`` in flight on each, and a server that goes down hands its prompts to the others
(:mod:`harness.backends.server_pool`). The first URL stands for them all in the reader's identity, as
``base_url`` does for one server, so the cache key is the same whichever server answers and however many serve.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from harness.backends.http import OpenAICompatClient, ServerRequestError, first_choice
from harness.backends.loading import ModelSpec
from harness.backends.offline_models import DEFAULT_MODELS_DIR, offline_model_spec
from harness.backends.server_pool import ServerPool
from harness.cache import stable_hash
from harness.read.answers import extract_answer
from harness.read.base import PromptRequest, Reader, Response
from harness.read.prompt import PromptTemplate

log = logging.getLogger(__name__)

ENDPOINTS = {"completions": "completions", "chat": "chat/completions"}
# The client's settings (OpenAICompatClient: base_url, api_key_env, timeout_s, max_retries, backoff_s,
# max_backoff_s, min_interval_s, sleep) where a local server wants other defaults.
CLIENT_DEFAULTS = {"base_url": "http://127.0.0.1:8080/v1", "timeout_s": 120.0}


class ServerReader(Reader):
    """A :class:`harness.read.base.Reader` over an OpenAI-compatible server (``base_url``) or several serving
    one model (``base_urls``), behind the same response cache. The remaining keyword arguments are the HTTP
    client's (:class:`harness.backends.http.OpenAICompatClient`), one client per server."""

    def __init__(
        self,
        name: str,
        model: str,
        endpoint: str = "completions",
        tokenizer: str | None = None,
        offline_model: str | None = None,
        models_dir: str | Path = DEFAULT_MODELS_DIR,
        trust_remote_code: bool = False,
        max_new_tokens: int = 24,
        temperature: float = 0.0,
        seed: int = 0,
        stop: Sequence[str] | None = None,
        concurrency: int = 4,
        max_tokens_field: str = "max_tokens",
        extra_body: Mapping[str, Any] | None = None,
        prompt: PromptTemplate | Mapping[str, Any] | None = None,
        cache_dir: str | Path | None = None,
        base_urls: Sequence[str] | None = None,
        **client: Any,
    ) -> None:
        if not model:
            raise ValueError(f"reader {name!r}: `model` (the name the server serves) is required")
        if endpoint not in ENDPOINTS:
            raise ValueError(f"reader {name!r}: endpoint must be one of {sorted(ENDPOINTS)}, got {endpoint!r}")
        if offline_model is not None:
            offline_model_spec(offline_model)
        elif not tokenizer:
            raise ValueError(
                f"reader {name!r}: needs `tokenizer` (hub id or local folder) or `offline_model` "
                "to count the budget in the served model's tokens"
            )
        if max_new_tokens < 1:
            raise ValueError(f"reader {name!r}: max_new_tokens must be >= 1, got {max_new_tokens}")
        if concurrency < 1:
            raise ValueError(f"reader {name!r}: concurrency must be >= 1, got {concurrency}")
        if temperature < 0:
            raise ValueError(f"reader {name!r}: temperature must be >= 0, got {temperature}")
        urls = server_urls(name, client.pop("base_url", None), base_urls)
        super().__init__(name, max_new_tokens=max_new_tokens, prompt=prompt, cache_dir=cache_dir)
        self.model = str(model)
        self.endpoint = endpoint
        # An explicit tokenizer wins; the packaged offline model is the fallback (the offline demo).
        self.tokenizer_spec = ModelSpec(
            pretrained=tokenizer,
            offline_model=None if tokenizer else offline_model,
            models_dir=models_dir,
            trust_remote_code=trust_remote_code,
        )
        self.temperature = float(temperature)
        self.seed = int(seed)
        self.stop = list(stop) if stop else []
        self.concurrency = int(concurrency)
        self.max_tokens_field = max_tokens_field
        self.extra_body = dict(extra_body or {})
        settings = {k: v for k, v in CLIENT_DEFAULTS.items() if k != "base_url"} | client
        self.http = ServerPool(urls, self.concurrency, f"reader {name!r}", **settings)
        self.prompt_token_mismatches = 0  # answers whose server-side prompt length differed from ours

    # ---- identity -------------------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        """The server that names them all in the identity: the only one, or the first of ``base_urls``."""
        return self.http.base_urls[0]

    @property
    def base_urls(self) -> list[str]:
        return list(self.http.base_urls)

    @property
    def model_id(self) -> str:
        return f"server:{self.model}@{self.base_url}"

    @property
    def reader_id(self) -> str:
        """Everything besides the prompt that changes an answer: the served model and where (the first
        server; every server serves the same model), the endpoint and the decoding settings (the seed only
        matters, and only counts, when sampling)."""
        decode = "greedy" if self.temperature == 0 else f"temperature={self.temperature}|seed={self.seed}"
        parts = [
            self.model_id,
            f"endpoint={self.endpoint}",
            f"decode={decode}",
            f"max_new_tokens={self.max_new_tokens}",
        ]
        if self.stop:
            parts.append(f"stop={stable_hash(self.stop)[:12]}")
        if self.extra_body:
            parts.append(f"extra={stable_hash(self.extra_body)[:12]}")
        return "|".join(parts)

    # ---- tokenizer ------------------------------------------------------------------------------

    def load_tokenizer(self):
        return self.tokenizer_spec.load_tokenizer()

    @property
    def tokenizer_name(self) -> str:
        return self.tokenizer_spec.source

    # ---- requests -------------------------------------------------------------------------------

    def messages(self, request: PromptRequest) -> list[dict[str, str]]:
        """Chat mode: the messages of ``request``, system message included."""
        return self.prompt.build_messages(request.question, request.context)

    def key_parts(self, request: PromptRequest) -> tuple[Any, ...]:
        # As for the local reader: the request is built by code under read/, so its fingerprint keys the answer.
        # Chat mode sends messages, not the rendered text: they key the answer too.
        if self.endpoint == "chat":
            return (self.render(request), self.messages(request))
        return (self.render(request),)

    def payload(self, request: PromptRequest) -> dict[str, Any]:
        """The request body sent for ``request``."""
        body: dict[str, Any] = {
            "model": self.model,
            self.max_tokens_field: self.max_new_tokens,
            "temperature": self.temperature,
        }
        if self.endpoint == "chat":
            body["messages"] = self.messages(request)
        else:
            body["prompt"] = self.render(request)
        if self.temperature > 0:
            body["seed"] = self.seed
        if self.stop:
            body["stop"] = self.stop
        body.update(self.extra_body)
        return body

    def _request(self, client: OpenAICompatClient, body: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        data = client.post(ENDPOINTS[self.endpoint], body)
        return first_choice(data, "message" if self.endpoint == "chat" else "text", f"reader {self.name!r}")

    def _generate(self, prompts: list[PromptRequest], prompt_keys: list[str]) -> dict[str, Response]:
        """Send ``prompts`` ``concurrency`` at a time to each server. Answers are cached as they arrive (with
        the prompt lengths, by ``_keep``); on the first failure the requests not yet started are not sent,
        those in flight finish and are kept. Answers are extracted from the raw text on every read, so cached
        entries follow the current rules."""
        raws: dict[str, Response] = {}
        # Built in the calling thread: rendering uses the tokenizer, which is not safe to share between threads.
        bodies = [self.payload(p) for p in prompts]

        def keep(i: int, result: tuple[str, dict[str, Any]]) -> None:
            raw, usage = result
            self._keep(prompts[i], prompt_keys[i], raw, usage)
            raws[prompt_keys[i]] = {"answer": extract_answer(raw), "raw": raw}

        failed = self.http.run(bodies, self._request, keep, thread_prefix=f"reader-{self.name}")
        if failed is not None:
            raise ServerRequestError(
                f"reader {self.name!r}: prompt {failed.index} of {len(prompts)} failed ({len(raws)} answers "
                f"received and cached): {failed.error}"
            ) from failed.error
        return raws

    def _keep(self, request: PromptRequest, key: str, raw: str, usage: Mapping[str, Any]) -> None:
        # Runs in the calling thread: Hugging Face fast tokenizers are not safe to share between threads.
        ours = self.count_prompt_tokens(self.render(request))
        theirs = usage.get("prompt_tokens")
        if isinstance(theirs, int) and theirs != ours:
            self.prompt_token_mismatches += 1
            if self.prompt_token_mismatches == 1:
                log.warning(
                    "reader %r: the server read %d prompt tokens where %s counts %d; the budget is "
                    "counted with the local tokenizer (set reader.tokenizer to the served model's)",
                    self.name,
                    theirs,
                    self.token_counter.name,
                    ours,
                )
        self.response_cache.put(
            {key: {"answer": extract_answer(raw), "raw": raw, "prompt_tokens": ours, "server_prompt_tokens": theirs}}
        )

    def close(self) -> None:
        self.http.close()


def server_urls(name: str, base_url: str | None, base_urls: Sequence[str] | None) -> list[str]:
    """The servers of a reader: ``base_url`` (one) or ``base_urls`` (several), never both."""
    if base_urls is None:
        return [CLIENT_DEFAULTS["base_url"] if base_url is None else base_url]
    if base_url is not None:
        raise ValueError(
            f"reader {name!r}: reader.base_url={base_url!r} and reader.base_urls are both set; give base_url for "
            "one server or base_urls for several (set the other to null)"
        )
    if isinstance(base_urls, str) or not base_urls:
        raise ValueError(f"reader {name!r}: reader.base_urls must be a non-empty list of URLs, got {base_urls!r}")
    return [str(url) for url in base_urls]
