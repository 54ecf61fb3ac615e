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
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from pathlib import Path
from typing import Any

from harness.backends.http import OpenAICompatClient, ServerRequestError, first_choice
from harness.backends.loading import ModelSpec
from harness.backends.offline_models import DEFAULT_MODELS_DIR, offline_model_spec
from harness.cache import stable_hash
from harness.core import signals
from harness.read.answers import extract_answer
from harness.read.base import PromptRequest, Reader, Response
from harness.read.prompt import PromptTemplate

log = logging.getLogger(__name__)

ENDPOINTS = {"completions": "completions", "chat": "chat/completions"}
# The client's settings (OpenAICompatClient: base_url, api_key_env, timeout_s, max_retries, backoff_s,
# max_backoff_s, min_interval_s, sleep) where a local server wants other defaults.
CLIENT_DEFAULTS = {"base_url": "http://127.0.0.1:8080/v1", "timeout_s": 120.0}


class ServerReader(Reader):
    """A :class:`harness.read.base.Reader` over an OpenAI-compatible server, behind the same response
    cache. The remaining keyword arguments are the HTTP client's (:class:`harness.backends.http.OpenAICompatClient`)."""

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
        self.http = OpenAICompatClient(
            **{**CLIENT_DEFAULTS, **client}, name=f"reader {name!r}", max_connections=self.concurrency
        )
        self.prompt_token_mismatches = 0  # answers whose server-side prompt length differed from ours

    # ---- identity -------------------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        return self.http.base_url

    @property
    def model_id(self) -> str:
        return f"server:{self.model}@{self.base_url}"

    @property
    def reader_id(self) -> str:
        """Everything besides the prompt that changes an answer: the served model and where, the endpoint
        and the decoding settings (the seed only matters, and only counts, when sampling)."""
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

    def _request(self, body: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        data = self.http.post(ENDPOINTS[self.endpoint], body)
        return first_choice(data, "message" if self.endpoint == "chat" else "text", f"reader {self.name!r}")

    def _generate(self, prompts: list[PromptRequest], prompt_keys: list[str]) -> dict[str, Response]:
        """Send ``prompts`` ``concurrency`` at a time. Answers are cached as they arrive (with the prompt
        lengths, by ``_keep``); on the first failure the requests not yet started are cancelled, those in
        flight finish and are kept. Answers are extracted from the raw text on every read, so cached
        entries follow the current rules."""
        raws: dict[str, Response] = {}
        failure: tuple[int, BaseException] | None = None
        index = {p: i for i, p in enumerate(prompts)}
        keys = dict(zip(prompts, prompt_keys, strict=False))
        abort = threading.Event()

        # Built in the calling thread: rendering uses the tokenizer, which is not safe to share between threads.
        bodies = {p: self.payload(p) for p in prompts}

        def request(prompt: PromptRequest) -> tuple[str, dict[str, Any]] | None:
            # Checked by the worker itself: a worker that just failed must not start the next prompt
            # before the calling thread has had a chance to cancel it.
            if abort.is_set():
                return None
            try:
                return self._request(bodies[prompt])
            except BaseException:
                abort.set()
                raise

        prefix = f"reader-{self.name}"
        pool = ThreadPoolExecutor(max_workers=min(self.concurrency, len(prompts)), thread_name_prefix=prefix)
        stopped = False
        try:
            pending = {pool.submit(request, p): p for p in prompts}
            while pending:
                done, _ = wait(pending, return_when=FIRST_COMPLETED)
                for future in done:
                    prompt = pending.pop(future)
                    if future.cancelled():
                        continue
                    error = future.exception()
                    if error is not None:
                        if failure is None:
                            failure = (index[prompt], error)
                            for other in pending:
                                other.cancel()
                        continue
                    result = future.result()
                    if result is None:  # skipped after another prompt failed
                        continue
                    raw, usage = result
                    self._keep(prompt, keys[prompt], raw, usage)
                    raws[keys[prompt]] = {"answer": extract_answer(raw), "raw": raw}
        except signals.Interrupted:
            # A stop does not wait for the answers in flight (a large model's can take minutes): the
            # requests not started are cancelled, those running are left behind, and what arrived is cached.
            stopped = True
            pool.shutdown(wait=False, cancel_futures=True)
            signals.leave_behind([t for t in threading.enumerate() if t.name.startswith(prefix)])
            raise
        finally:
            if not stopped:
                pool.shutdown(wait=True, cancel_futures=True)
        if failure is not None:
            i, error = failure
            raise ServerRequestError(
                f"reader {self.name!r}: prompt {i} of {len(prompts)} failed ({len(raws)} answers received and "
                f"cached): {error}"
            ) from error
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
