"""The llama.cpp reader backend: a GGUF model run natively quantised through ``xllamacpp``.

The harness renders every prompt itself (chat template of the Hugging Face tokenizer) and counts it
with that tokenizer. To make the counted prompt exactly what the model reads, the generator sends the
tokenizer's ids (raw completion, no second chat template, no extra BOS), never the text.

Greedy decoding only (temperature 0, top-k 1). Several prompts go to the server in one request and
are decoded in ``n_parallel`` slots that share each forward pass.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass, fields
from functools import lru_cache
from pathlib import Path
from typing import Any

from harness.backends.offline_models import ensure_offline_tokenizer, gguf_path, offline_model_spec
from harness.backends.tokenizer_files import ensure_pad_token, memoized_tokenizer, pretrained_tokenizer
from harness.core import signals
from harness.core.model_files import sha256_file
from harness.core.threads import resolve_threads

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class LlamaCppSettings:
    """Runtime settings of the llama.cpp server. ``n_ctx`` is the context of one slot."""

    n_ctx: int = 4096
    n_parallel: int = 1  # slots decoded together in one batch
    n_threads: int | None = None  # decode and prompt threads; None: this job's share of the CPUs
    n_batch: int = 512  # prompt tokens processed per forward pass
    seed: int = 0  # greedy decoding draws nothing; llama.cpp still asks for a sampler seed
    # Reuse the KV cache of the prefix a slot's last prompt shares with the next (the instruction every
    # prompt starts with). Off by default: the reused prefix was computed in another batch split, which
    # can move last-bit logits, so an answer could depend on the prompt read before it. On, it joins the
    # cache identity (``|prefix_cache``).
    cache_prompt: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.cache_prompt, bool):
            raise ValueError(f"llama_cpp.cache_prompt must be true or false, got {self.cache_prompt!r}")
        for name in ("n_ctx", "n_parallel", "n_threads", "n_batch"):
            value = getattr(self, name)
            if value is None and name == "n_threads":
                continue
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"llama_cpp.{name} must be a positive integer, got {value!r}")

    @classmethod
    def from_mapping(cls, settings: Mapping[str, Any] | None) -> LlamaCppSettings:
        settings = dict(settings or {})
        known = {f.name for f in fields(cls)}
        unknown = set(settings) - known
        if unknown:
            raise ValueError(f"unknown llama_cpp settings {sorted(unknown)}; allowed {sorted(known)}")
        return cls(**{k: v if k == "cache_prompt" else int(v) for k, v in settings.items() if v is not None})

    @property
    def identity(self) -> str:
        """What of these settings can change an answer: the slot count, and prefix reuse when on."""
        return f"slots={self.n_parallel}" + ("|prefix_cache" if self.cache_prompt else "")


@lru_cache(maxsize=64)
def _sha256_of(path: str, size: int, mtime_ns: int) -> str:
    # size and mtime_ns only key the memo: a rewritten file is hashed again.
    return sha256_file(path)


def file_sha256(path: str | Path) -> str:
    """The file's sha256, computed once per process for a given size and modification time."""
    stat = os.stat(path)
    return _sha256_of(str(Path(path).resolve()), stat.st_size, stat.st_mtime_ns)


def gguf_quantization(path: str | Path) -> str:
    """The weight format a GGUF file declares (``general.file_type``), e.g. ``Q4_K_M``."""
    import gguf

    reader = gguf.GGUFReader(str(path))
    field = reader.fields.get("general.file_type")
    if field is None:
        return "unknown"
    value = int(field.parts[field.data[0]][0])
    try:
        return gguf.LlamaFileType(value).name.removeprefix("MOSTLY_")
    except ValueError:
        return f"file_type_{value}"


def load_gguf_tokenizer(folder_or_gguf: str | Path):
    """The Hugging Face tokenizer of a llama.cpp reader, left-padded with a pad token (like the
    transformers backend's), from a tokenizer folder or straight from a GGUF file."""
    path = Path(folder_or_gguf)

    def load():
        if path.suffix == ".gguf":
            from transformers import AutoTokenizer

            tokenizer = AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
        else:
            tokenizer = pretrained_tokenizer(folder_or_gguf)
        tokenizer.padding_side = "left"
        return ensure_pad_token(tokenizer, folder_or_gguf)

    return memoized_tokenizer(path, load, "llama_cpp")


def resolve_gguf(gguf: str | Path | None, offline_model: str | None, models_dir: str | Path) -> Path:
    """The GGUF a llama.cpp model runs: ``gguf`` when set, else the offline model's file."""
    if gguf:
        return Path(gguf)
    if offline_model is None:
        raise ValueError("a llama.cpp model needs `gguf` (a .gguf path) or `offline_model`")
    return gguf_path(offline_model, models_dir)


def gguf_identity(gguf: str | Path | None, offline_model: str | None, models_dir: str | Path) -> str:
    """``gguf=<file name>:<sha256>|quant=<format>``. A ladder model's sha256 is the recorded one its
    assembly was verified against (so the id needs no file); any other GGUF is hashed once per process."""
    spec = offline_model_spec(offline_model) if offline_model and not gguf else None
    if spec is not None and spec.sha256:
        name, sha, quant = spec.gguf_file, spec.sha256, spec.quantization
    else:
        path = resolve_gguf(gguf, offline_model, models_dir)
        name, sha = path.name, file_sha256(path)
        quant = spec.quantization if spec is not None and spec.quantization else gguf_quantization(path)
    return f"gguf={name}:{sha}|quant={quant}"


def gguf_tokenizer_source(
    tokenizer: str | Path | None, gguf: str | Path | None, offline_model: str | None, models_dir: str | Path
) -> str | Path:
    """Where a llama.cpp model's Hugging Face tokenizer is read from: ``tokenizer`` when set; else the
    offline model's tokenizer folder (converted from its GGUF once and kept); else the GGUF file itself
    (read on every load)."""
    if tokenizer:
        return tokenizer
    if offline_model and not gguf:
        return ensure_offline_tokenizer(offline_model, models_dir)
    return resolve_gguf(gguf, offline_model, models_dir)


class LlamaCppGenerator:
    """Greedy completion of already-rendered prompts by a llama.cpp server held in this process."""

    def __init__(
        self,
        gguf: str | Path,
        tokenizer,
        max_new_tokens: int,
        settings: LlamaCppSettings | None = None,
        add_special_tokens: bool = False,
    ) -> None:
        self.gguf = Path(gguf)
        if not self.gguf.is_file():
            raise FileNotFoundError(f"GGUF file {self.gguf} does not exist")
        if max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be >= 1, got {max_new_tokens}")
        self.tokenizer = tokenizer
        self.max_new_tokens = int(max_new_tokens)
        self.settings = settings or LlamaCppSettings()
        self.add_special_tokens = add_special_tokens
        self._server = None
        self.last_timings: list[dict[str, Any]] = []

    @property
    def server(self):
        if self._server is None:
            import xllamacpp

            s = self.settings
            params = xllamacpp.CommonParams()
            params.model.path = str(self.gguf)
            params.n_parallel = s.n_parallel
            params.n_ctx = s.n_ctx * s.n_parallel  # llama.cpp splits the context evenly over the slots
            params.n_batch = s.n_batch
            threads = resolve_threads(s.n_threads, f"llama.cpp on {self.gguf.name}")
            params.cpuparams.n_threads = threads
            params.cpuparams_batch.n_threads = threads
            params.sampling.temp = 0
            params.sampling.top_k = 1
            params.sampling.seed = s.seed
            params.n_gpu_layers = (
                0  # a CPU wheel has no other device; keep a GPU build on CPU too for identical answers
            )
            params.verbosity = -1  # the server otherwise logs every request to stderr
            log.debug("starting llama.cpp on %s (%s)", self.gguf, s)
            self._server = xllamacpp.Server(params)
        return self._server

    def encode(self, prompts: list[str], max_new_tokens: int | None = None) -> list[list[int]]:
        """The token ids of each prompt, refused when a prompt and ``max_new_tokens`` (default: the
        generator's) do not fit one slot's context."""
        max_new_tokens = self.max_new_tokens if max_new_tokens is None else int(max_new_tokens)
        ids = [list(x) for x in self.tokenizer(prompts, add_special_tokens=self.add_special_tokens)["input_ids"]]
        limit = self.settings.n_ctx - max_new_tokens
        for prompt_ids in ids:
            if len(prompt_ids) > limit:
                raise ValueError(
                    f"a prompt of {len(prompt_ids)} tokens does not fit llama_cpp.n_ctx={self.settings.n_ctx} "
                    f"with max_new_tokens={max_new_tokens}; raise reader.llama_cpp.n_ctx"
                )
        return ids

    def generate(self, prompts: list[str], max_new_tokens: int | None = None) -> list[str]:
        """The generated text of each prompt, in order (special tokens not rendered). ``max_new_tokens``
        overrides the generator's for this request (the server is not restarted)."""
        if not prompts:
            return []
        return self.generate_ids(self.encode(prompts, max_new_tokens), max_new_tokens)

    def generate_ids(self, ids: list[list[int]], max_new_tokens: int | None = None) -> list[str]:
        """The generated text of each already-encoded prompt (see :meth:`encode`), in order."""
        if not ids:
            return []
        max_new_tokens = self.max_new_tokens if max_new_tokens is None else int(max_new_tokens)
        if max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be >= 1, got {max_new_tokens}")
        request = {
            "prompt": ids,
            "max_tokens": max_new_tokens,
            "temperature": 0.0,
            "top_k": 1,
            "seed": self.settings.seed,
            # Off unless asked for: a reused prefix can make an answer depend on the prompt read before it.
            "cache_prompt": self.settings.cache_prompt,
        }
        server = self.server
        # A batch is one native call of tens of seconds: a stop signal must not wait for it.
        response = signals.abandonable(lambda: server.handle_completions(request), name="llama.cpp")
        if not isinstance(response, Mapping) or "choices" not in response:
            raise RuntimeError(f"llama.cpp on {self.gguf.name} answered without choices: {str(response)[:500]}")
        choices = sorted(response["choices"], key=lambda c: c["index"])
        if len(choices) != len(ids):
            raise RuntimeError(f"llama.cpp on {self.gguf.name}: {len(ids)} prompts but {len(choices)} answers")
        timings = response.get("timings")
        self.last_timings = timings if isinstance(timings, list) else [timings] if timings else []
        return [c["text"] for c in choices]

    def close(self) -> None:
        self._server = None
