"""A reader served over HTTP by an OpenAI-compatible server (vLLM, TGI, SGLang, llama.cpp's server).

The harness renders and counts every prompt with a local tokenizer (``tokenizer``: a hub id or a local
folder of the served model's tokenizer), so the context budget is measured in that tokenizer's tokens;
point it at the served model's own tokenizer, or the budget counts something else.

``endpoint: completions`` (the default) sends exactly the text that was rendered and counted to
``/v1/completions``; ``endpoint: chat`` sends the question's messages to ``/v1/chat/completions`` and
the server applies its own chat template, so what the model reads may differ from what was counted.
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
from harness.backends.response_cache import ResponseCache
from harness.cache import TextStore, stable_hash
from harness.cache.fingerprint import code_fingerprint
from harness.core import signals
from harness.read.prompt import (
    PromptTemplate,
    add_special_tokens_for,
    as_template,
    count_prompt_tokens,
    count_prompt_tokens_many,
)
from harness.text.tokens import TokenCounter

log = logging.getLogger(__name__)

ENDPOINTS = {"completions": "completions", "chat": "chat/completions"}
# The client's settings (OpenAICompatClient: base_url, api_key_env, timeout_s, max_retries, backoff_s,
# max_backoff_s, min_interval_s, sleep) where a local server wants other defaults.
CLIENT_DEFAULTS = {"base_url": "http://127.0.0.1:8080/v1", "timeout_s": 120.0}


def _clean(raw: str) -> str:
    # The local reader's answer extraction, so a server reader and a local one score alike.
    from harness.read.module import clean_answer

    return clean_answer(raw)


def _cached_raw(key: str, entry: Any) -> str | None:
    return entry["raw"] if isinstance(entry, Mapping) and isinstance(entry.get("raw"), str) else None


class ServerReader:
    """The ``Reader`` interface (``render_prompt``, ``count_prompt_tokens``, ``token_counter``, ``answer``,
    ``responses``) over an OpenAI-compatible server, behind the same response cache. The remaining
    keyword arguments are the HTTP client's (:class:`harness.backends.http.OpenAICompatClient`)."""

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
        self.name = name
        self.model = str(model)
        self.endpoint = endpoint
        # An explicit tokenizer wins; the packaged offline model is the fallback (the offline demo).
        self.tokenizer_spec = ModelSpec(
            pretrained=tokenizer,
            offline_model=None if tokenizer else offline_model,
            models_dir=models_dir,
            trust_remote_code=trust_remote_code,
        )
        self.max_new_tokens = int(max_new_tokens)
        self.temperature = float(temperature)
        self.seed = int(seed)
        self.stop = list(stop) if stop else []
        self.concurrency = int(concurrency)
        self.max_tokens_field = max_tokens_field
        self.extra_body = dict(extra_body or {})
        self.prompt = as_template(prompt)
        self.http = OpenAICompatClient(
            **{**CLIENT_DEFAULTS, **client}, name=f"reader {name!r}", max_connections=self.concurrency
        )
        self.cache_dir = None if cache_dir is None else Path(cache_dir)
        self.cache = TextStore(self.cache_dir / "responses.sqlite", table="responses") if cache_dir else None
        self.response_cache = ResponseCache(self.cache, decode=_cached_raw)
        self.generated = 0  # distinct prompts actually sent and answered
        self.requested = 0  # prompts asked for, repeats included
        self.prompt_token_mismatches = 0  # answers whose server-side prompt length differed from ours
        self._tokenizer = None
        self._token_counter: TokenCounter | None = None
        # Chat mode sends messages, not the rendered text: remember which messages each rendering came from.
        self._messages: dict[str, list[dict[str, str]]] = {}

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

    def __repr__(self) -> str:
        return f"ServerReader(name={self.name!r}, id={self.reader_id!r})"

    # ---- tokenizer and prompts ------------------------------------------------------------------

    @property
    def tokenizer(self):
        if self._tokenizer is None:
            self._tokenizer = self.tokenizer_spec.load_tokenizer()
        return self._tokenizer

    @property
    def token_counter(self) -> TokenCounter:
        if self._token_counter is None:
            self._token_counter = TokenCounter(self.tokenizer, name=self.tokenizer_spec.source)
        return self._token_counter

    @property
    def add_special_tokens(self) -> bool:
        return add_special_tokens_for(self.prompt, self.tokenizer)

    def render_prompt(self, question: str, context_text: str) -> str:
        rendered = self.prompt.render(self.tokenizer, question, context_text)
        if self.endpoint == "chat":
            self._messages[rendered] = self.prompt.build_messages(question, context_text)
        return rendered

    def count_prompt_tokens(self, prompt: str) -> int:
        return count_prompt_tokens(self.tokenizer, prompt, add_special_tokens=self.add_special_tokens)

    def count_prompt_tokens_many(self, prompts: Sequence[str]) -> list[int]:
        return count_prompt_tokens_many(self.tokenizer, prompts, add_special_tokens=self.add_special_tokens)

    def messages_for(self, prompt: str) -> list[dict[str, str]]:
        """Chat mode: the messages ``prompt`` was rendered from; a prompt this reader did not render is
        sent as one user message."""
        return self._messages.get(prompt) or [{"role": "user", "content": prompt}]

    # ---- requests -------------------------------------------------------------------------------

    def cache_key(self, prompt: str) -> str:
        # As for the local reader: the request is built by code under read/, so its fingerprint keys the answer.
        if self.endpoint == "chat":
            return stable_hash(self.reader_id, code_fingerprint("read"), prompt, self.messages_for(prompt))
        return stable_hash(self.reader_id, code_fingerprint("read"), prompt)

    def payload(self, prompt: str) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.model,
            self.max_tokens_field: self.max_new_tokens,
            "temperature": self.temperature,
        }
        if self.endpoint == "chat":
            body["messages"] = self.messages_for(prompt)
        else:
            body["prompt"] = prompt
        if self.temperature > 0:
            body["seed"] = self.seed
        if self.stop:
            body["stop"] = self.stop
        body.update(self.extra_body)
        return body

    def _request(self, prompt: str) -> tuple[str, dict[str, Any]]:
        data = self.http.post(ENDPOINTS[self.endpoint], self.payload(prompt))
        return first_choice(data, "message" if self.endpoint == "chat" else "text", f"reader {self.name!r}")

    def answer(self, prompts: Sequence[str]) -> list[str]:
        """One short answer per prompt, aligned with ``prompts``; only uncached distinct prompts are sent."""
        return [response["answer"] for response in self.responses(prompts)]

    def responses(self, prompts: Sequence[str]) -> list[dict[str, str]]:
        """``{"answer", "raw"}`` per prompt: the extracted short answer and the whole generation."""
        prompts = list(prompts)
        self.requested += len(prompts)
        # Each answer is committed by _keep as it arrives, with the prompt lengths.
        raws, _ = self.response_cache.responses(prompts, self.cache_key, self._generate, commit=False)
        # Answers are extracted from the raw text on every read, so cached entries follow the current rules.
        return [{"answer": _clean(raw), "raw": raw} for raw in raws]

    def _generate(self, prompts: list[str], prompt_keys: list[str]) -> dict[str, str]:
        """Send ``prompts`` ``concurrency`` at a time. Answers are cached as they arrive; on the first
        failure the requests not yet started are cancelled, those in flight finish and are kept."""
        raws: dict[str, str] = {}
        failure: tuple[int, BaseException] | None = None
        index = {p: i for i, p in enumerate(prompts)}
        keys = dict(zip(prompts, prompt_keys, strict=False))
        abort = threading.Event()

        def request(prompt: str) -> tuple[str, dict[str, Any]] | None:
            # Checked by the worker itself: a worker that just failed must not start the next prompt
            # before the calling thread has had a chance to cancel it.
            if abort.is_set():
                return None
            try:
                return self._request(prompt)
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
                    raws[keys[prompt]] = raw
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

    def _keep(self, prompt: str, key: str, raw: str, usage: Mapping[str, Any]) -> None:
        # Runs in the calling thread: Hugging Face fast tokenizers are not safe to share between threads.
        ours = self.count_prompt_tokens(prompt)
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
        self.generated += 1
        self.response_cache.put(
            {key: {"answer": _clean(raw), "raw": raw, "prompt_tokens": ours, "server_prompt_tokens": theirs}}
        )

    def close(self) -> None:
        self.http.close()
