"""The reader contract: a question and its packed context in, a short answer out, each distinct request
generated once.

Every reader renders a request with its own tokenizer and prompt template (the text counted against the
budget), keys its response by ``stable_hash(reader_id, code_fingerprint("read"), *key_parts)`` in one
response cache (``harness.backends.response_cache``) and generates only the requests not found. Backends
implement what differs: the id, how the tokenizer is loaded, what a request's key holds and ``_generate``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.backends.response_cache import ResponseCache
from harness.cache import TextStore
from harness.read.answers import extract_answer
from harness.read.prompt import (
    PromptTemplate,
    add_special_tokens_for,
    as_template,
    count_prompt_tokens,
    count_prompt_tokens_many,
)
from harness.text.tokens import TokenCounter

Response = dict[str, str]


@dataclass(frozen=True)
class PromptRequest:
    """What a reader is asked: the question and the packed context text (empty: closed book)."""

    question: str
    context: str


def cached_response(key: str, entry: Any) -> Response | None:
    """A cache entry as ``{"answer", "raw"}``, the answer extracted afresh from the raw generation, so
    entries written under older extraction rules read as if generated now; ``None`` when it holds no raw text."""
    if isinstance(entry, Mapping) and isinstance(entry.get("raw"), str):
        return {"answer": extract_answer(entry["raw"]), "raw": entry["raw"]}
    return None


class Reader(ABC):
    """One generator behind a response cache. ``responses(requests)`` gives ``{"answer", "raw"}`` per
    request; ``render(request)`` the prompt text that is counted against the budget."""

    def __init__(
        self,
        name: str,
        max_new_tokens: int = 24,
        prompt: PromptTemplate | Mapping[str, Any] | None = None,
        cache_dir: str | Path | None = None,
    ) -> None:
        if max_new_tokens < 1:
            raise ValueError(f"reader {name!r}: max_new_tokens must be >= 1, got {max_new_tokens}")
        self.name = name
        self.max_new_tokens = int(max_new_tokens)
        self.prompt = as_template(prompt)
        self.cache_dir = None if cache_dir is None else Path(cache_dir)
        self.cache = TextStore(self.cache_dir / "responses.sqlite", table="responses") if cache_dir else None
        # reader_id is read per key, not here: a vLLM reader's id digests its weight files, once, when first keyed.
        self.response_cache: ResponseCache[Response] = ResponseCache(
            self.cache, decode=self.decode_entry, identity=lambda: (self.reader_id,), stage="read"
        )
        self.generated = 0  # distinct requests actually generated
        self.requested = 0  # requests asked for, repeats included
        self._tokenizer = None
        self._token_counter: TokenCounter | None = None

    # ---- identity -------------------------------------------------------------------------------

    @property
    @abstractmethod
    def reader_id(self) -> str:
        """Everything besides the request that changes an answer: weights, precision, decoding, ..."""

    @property
    def model_id(self) -> str:
        """The model, as rows and the token counter name it."""
        return self.name

    @property
    def numerics(self) -> dict[str, str]:
        """How the answers are computed, as far as it changes them: backend, weights' format, dtype and
        device. Rows (``reader_numerics``) and ``summary.json`` carry it, and a report never pools rows whose
        numerics differ. A server's are its own: named by its model."""
        return {"backend": "server", "weights": self.model_id, "dtype": "server", "device": "server"}

    @property
    def numerics_label(self) -> str:
        """``numerics`` as one string, the ``reader_numerics`` row column: ``transformers/hf/bfloat16/cpu-amx``."""
        return "/".join(self.numerics[key] for key in ("backend", "weights", "dtype", "device"))

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r}, id={self.reader_id!r})"

    # ---- tokenizer and prompts (no weights loaded) ---------------------------------------------

    @abstractmethod
    def load_tokenizer(self):
        """The tokenizer prompts are rendered and counted with."""

    @property
    def tokenizer(self):
        if self._tokenizer is None:
            self._tokenizer = self.load_tokenizer()
        return self._tokenizer

    @property
    def tokenizer_name(self) -> str:
        return self.model_id

    @property
    def token_counter(self) -> TokenCounter:
        if self._token_counter is None:
            self._token_counter = TokenCounter(self.tokenizer, name=self.tokenizer_name)
        return self._token_counter

    @property
    def add_special_tokens(self) -> bool:
        return add_special_tokens_for(self.prompt, self.tokenizer)

    def render(self, request: PromptRequest) -> str:
        """The prompt text of ``request``: what is counted against the budget."""
        return self.prompt.render(self.tokenizer, request.question, request.context)

    def count_prompt_tokens(self, prompt: str) -> int:
        return count_prompt_tokens(self.tokenizer, prompt, add_special_tokens=self.add_special_tokens)

    def count_prompt_tokens_many(self, prompts: Sequence[str]) -> list[int]:
        return count_prompt_tokens_many(self.tokenizer, prompts, add_special_tokens=self.add_special_tokens)

    # ---- responses ------------------------------------------------------------------------------

    def key_parts(self, request: PromptRequest) -> tuple[Any, ...]:
        """What of ``request`` keys its answer besides the reader: the rendered prompt (retrieval or
        packing code only matters through it)."""
        return (self.render(request),)

    def cache_key(self, request: PromptRequest) -> str:
        return self.response_cache.key(*self.key_parts(request))

    @staticmethod
    def decode_entry(key: str, entry: Any) -> Response | None:
        """A stored entry as a response; ``None`` regenerates it."""
        return cached_response(key, entry)

    def answer(self, requests: Sequence[PromptRequest]) -> list[str]:
        """One short answer per request, aligned with ``requests``; only uncached distinct requests run."""
        return [response["answer"] for response in self.responses(requests)]

    def responses(self, requests: Sequence[PromptRequest]) -> list[Response]:
        """``{"answer", "raw"}`` per request, aligned with ``requests``: the extracted short answer and the
        whole generation. Only uncached distinct requests run."""
        requests = list(requests)
        for i, request in enumerate(requests):
            if not isinstance(request, PromptRequest):
                raise TypeError(f"reader {self.name!r}: request {i} is {type(request).__name__}, not PromptRequest")
        self.requested += len(requests)
        # Backends commit as they go (per batch, per request), so a run killed part-way keeps what it paid for.
        found, generated = self.response_cache.responses(requests, self.cache_key, self._generate, commit=False)
        self.generated += generated
        return found

    @abstractmethod
    def _generate(self, requests: list[PromptRequest], keys: list[str]) -> dict[str, Response]:
        """``key -> {"answer", "raw"}`` for distinct uncached requests, each committed to ``self.cache``."""

    def close(self) -> None:
        """Release what the reader holds open (connections, engines); a no-op by default."""
        return None
