"""The reader stage: rendered prompts in, short answers out, each distinct prompt generated once.

Answers are cached by ``stable_hash(reader_id, prompt)``: a reader-scale or policy sweep that produces
a prompt already answered by the same reader (same weights, precision and decoding) reuses it.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from harness.backends.llama_cpp import (
    LlamaCppGenerator,
    LlamaCppSettings,
    gguf_identity,
    gguf_tokenizer_source,
    load_gguf_tokenizer,
    resolve_gguf,
)
from harness.backends.loading import ModelSpec, resolve_dtype, resolve_pretrained
from harness.backends.response_cache import ResponseCache
from harness.backends.vllm_engine import VllmGenerator, VllmSettings, model_files_digest, vllm_python, vllm_version
from harness.cache import TextStore, stable_hash
from harness.cache.fingerprint import code_fingerprint
from harness.core.threads import resolve_threads
from harness.read.answers import extract_answer
from harness.read.prompt import (
    PromptTemplate,
    add_special_tokens_for,
    as_template,
    count_prompt_tokens,
    count_prompt_tokens_many,
)
from harness.text.tokens import TokenCounter

log = logging.getLogger(__name__)

BACKENDS = ("transformers", "llama_cpp", "vllm")
# What the engine backends do in place of the transformers settings they refuse: (quantization, devices).
_ENGINE_LIMITS = {
    # The llama.cpp server lives in this process and cannot be pickled into spawned ones.
    "llama_cpp": (
        "a llama_cpp reader reads the GGUF's own quantization",
        "the llama_cpp backend runs in one process; use reader.llama_cpp.n_parallel for parallel decoding",
    ),
    "vllm": (
        "a vllm reader names vLLM's own in reader.vllm.quantization (awq, gptq, bitsandbytes)",
        "the vllm engine places itself; use reader.vllm.tensor_parallel_size or reader.vllm.data_parallel_size "
        "for several devices",
    ),
}
TRAINER_KEYS = {"accelerator", "devices", "strategy", "precision", "num_nodes"}
DEFAULT_TRAINER = {"accelerator": "cpu", "devices": 1, "strategy": "auto"}
# Lightning loggers that announce the hardware on every Trainer; one line per read call is noise.
_CHATTY_LOGGERS = (
    "pytorch_lightning.utilities.rank_zero",
    "lightning.pytorch.utilities.rank_zero",
    "pytorch_lightning.accelerators.cuda",
    "lightning.pytorch.accelerators.cuda",
)


@contextmanager
def _quiet_lightning():
    levels = {name: logging.getLogger(name).level for name in _CHATTY_LOGGERS}
    for name in levels:
        logging.getLogger(name).setLevel(logging.WARNING)
    try:
        with warnings.catch_warnings():
            # Prompts are tokenized inside predict_step, so loader workers would have nothing to do.
            warnings.filterwarnings("ignore", message=".*does not have many workers.*")
            warnings.filterwarnings("ignore", message=".*Trying to infer the `batch_size`.*")
            warnings.filterwarnings("ignore", message=".*isinstance\\(treespec, LeafSpec\\).*")
            yield
    finally:
        for name, level in levels.items():
            logging.getLogger(name).setLevel(level)


def _process_count(trainer: Mapping[str, Any]) -> int | None:
    """Processes the trainer settings ask for, when they say (devices ``-1``/``auto`` leave it to Lightning)."""
    devices = trainer.get("devices", 1)
    if isinstance(devices, Sequence) and not isinstance(devices, str):
        count = len(devices)
    elif str(devices).strip().lstrip("-").isdigit() and int(devices) > 0:
        count = int(devices)
    else:
        return None
    return count * int(trainer.get("num_nodes", 1) or 1)


def _spawns_its_processes(strategy: str) -> bool:
    return strategy == "auto" or "spawn" in strategy or "fork" in strategy or strategy == "ddp_notebook"


def _refuse_strategy(name: str, strategy: str, processes: int) -> ValueError:
    return ValueError(
        f"reader {name!r}: reader.trainer.strategy={strategy} with {processes} processes starts each extra "
        "process by re-running the whole command, so every process would run the whole job and some prompts "
        "would come back without an answer; use reader.trainer.strategy=ddp_spawn (or leave it at auto)"
    )


def _check_strategy(name: str, trainer: Mapping[str, Any]) -> None:
    """Refuse, before any work, a multi-process strategy that re-runs the command (plain ``ddp``)."""
    strategy = str(trainer.get("strategy", "auto"))
    processes = _process_count(trainer)
    if processes is not None and processes > 1 and not _spawns_its_processes(strategy):
        raise _refuse_strategy(name, strategy, processes)


def _cached_response(key: str, entry: Any) -> dict[str, str]:
    """A cache entry as ``{"answer", "raw"}``, the answer extracted afresh from the raw generation, so
    entries written under older extraction rules read as if generated now."""
    if isinstance(entry, Mapping) and isinstance(entry.get("raw"), str):
        return {"answer": extract_answer(entry["raw"]), "raw": entry["raw"]}
    if isinstance(entry, Mapping) and isinstance(entry.get("answer"), str):
        return {"answer": entry["answer"], "raw": entry["answer"]}
    raise ValueError(f"response cache entry {key}: expected {{'answer', 'raw'}} strings, got {entry!r}")


class Reader:
    """A generator LM behind a response cache, run through ``pl.Trainer.predict``.

    The weights are named by the model keys of :class:`harness.backends.loading.ModelSpec` (``pretrained``,
    ``offline_model``, ``models_dir``, ``dtype``, ``quantization``, ``device_map``,
    ``trust_remote_code``), given as keyword arguments like every other setting."""

    def __init__(
        self,
        name: str,
        batch_size: int = 8,
        max_new_tokens: int = 24,
        num_beams: int = 1,
        prompt: PromptTemplate | Mapping[str, Any] | None = None,
        cache_dir: str | Path | None = None,
        trainer: Mapping[str, Any] | None = None,
        sort_by_length: bool = True,
        show_progress: bool = True,
        torch_threads: int | None = None,
        backend: str = "transformers",
        gguf: str | None = None,
        tokenizer: str | None = None,
        llama_cpp: Mapping[str, Any] | None = None,
        vllm: Mapping[str, Any] | None = None,
        **model: Any,
    ) -> None:
        if backend not in BACKENDS:
            raise ValueError(f"reader {name!r}: unknown backend {backend!r}; choose one of {BACKENDS}")
        spec = ModelSpec.from_config(model, owner=f"reader {name!r}")
        offline_model, quantization = spec.offline_model, spec.quantization
        if offline_model is None and backend == "llama_cpp" and not gguf:
            raise ValueError(f"reader {name!r}: the llama_cpp backend needs `gguf` (a .gguf path) or `offline_model`")
        if offline_model is None and backend in ("transformers", "vllm") and not spec.pretrained:
            raise ValueError(f"reader {name!r} needs `pretrained` (hub id or path) or `offline_model`")
        if batch_size < 1:
            raise ValueError(f"reader {name!r}: batch_size must be >= 1, got {batch_size}")
        if max_new_tokens < 1:
            raise ValueError(f"reader {name!r}: max_new_tokens must be >= 1, got {max_new_tokens}")
        if num_beams < 1:
            raise ValueError(f"reader {name!r}: num_beams must be >= 1, got {num_beams}")
        if torch_threads is not None and torch_threads < 1:
            raise ValueError(f"reader {name!r}: torch_threads must be >= 1 or null, got {torch_threads}")
        trainer = dict(DEFAULT_TRAINER, **dict(trainer or {}))
        unknown = set(trainer) - TRAINER_KEYS
        if unknown:
            raise ValueError(
                f"reader {name!r}: unknown trainer settings {sorted(unknown)}; allowed {sorted(TRAINER_KEYS)}"
            )
        _check_strategy(name, trainer)
        if backend == "llama_cpp" and gguf and offline_model is not None:
            raise ValueError(f"reader {name!r}: set `gguf` (a .gguf path) or `offline_model`, not both")
        if backend in _ENGINE_LIMITS:
            own_quantization, own_devices = _ENGINE_LIMITS[backend]
            if num_beams != 1:
                raise ValueError(f"reader {name!r}: the {backend} backend decodes greedily; num_beams must be 1")
            if quantization is not None:
                raise ValueError(
                    f"reader {name!r}: quantization={quantization!r} is a bitsandbytes setting of the transformers "
                    f"backend; {own_quantization}"
                )
            if str(trainer.get("devices", 1)) != "1":
                raise ValueError(f"reader {name!r}: {own_devices}, not reader.trainer.devices")
        # Unknown keys fail here, whichever backend runs.
        llama_settings = LlamaCppSettings.from_mapping(llama_cpp)
        vllm_settings = VllmSettings.from_mapping(vllm)

        self.name = name
        self.spec = spec
        self.batch_size = int(batch_size)
        self.max_new_tokens = int(max_new_tokens)
        self.num_beams = int(num_beams)
        self.prompt = as_template(prompt)
        self.trainer_settings = {k: v for k, v in trainer.items() if v is not None}
        self.sort_by_length = sort_by_length
        self.show_progress = show_progress
        self.torch_threads = torch_threads
        self.backend = backend
        self.gguf = None if gguf is None else str(gguf)
        self.tokenizer_path = None if tokenizer is None else str(tokenizer)
        self.llama_cpp = llama_settings
        self.vllm = vllm_settings
        self._gguf_identity: str | None = None
        self._vllm_identity: str | None = None
        self.cache_dir = None if cache_dir is None else Path(cache_dir)
        self.cache = TextStore(self.cache_dir / "responses.sqlite", table="responses") if cache_dir else None
        self.response_cache = ResponseCache(self.cache, decode=_cached_response)
        self.generated = 0  # distinct prompts actually run through the model
        self.requested = 0  # prompts asked for, repeats included
        self._tokenizer = None
        self._token_counter: TokenCounter | None = None
        self._module = None

    # ---- identity -------------------------------------------------------------------------------

    @property
    def model_id(self) -> str:
        """The weights: an offline model by name (the same on every machine), else the hub id or path."""
        if self.spec.offline_model or self.backend != "llama_cpp":
            return self.spec.source
        return f"gguf:{Path(self.gguf).name}"

    @property
    def reader_id(self) -> str:
        """Everything that changes an answer for a given prompt: weights, precision and decoding.
        An id without a ``backend=`` field is the transformers backend's (kept as it was, so existing
        caches stay valid)."""
        if self.backend == "llama_cpp":
            # Slots share each forward pass, so the slot count can move last-bit logits: it is part of the id.
            return (
                f"{self.model_id}|backend=llama_cpp|{self.gguf_identity}"
                f"|decode=greedy|max_new_tokens={self.max_new_tokens}|{self.llama_cpp.identity}"
            )
        dtype = self.dtype_name
        if self.backend == "vllm":
            # vLLM schedules prompts into batches of its own (continuous batching), so no batch size here.
            # The files' digest and vLLM's version are read once per reader, not once per cache key.
            if self._vllm_identity is None:
                self._vllm_identity = (
                    f"files={model_files_digest(self.model_path)}|dtype={dtype}|{self.vllm.identity}"
                    f"|decode=greedy|max_new_tokens={self.max_new_tokens}"
                    f"|vllm={vllm_version(vllm_python(self.vllm.python))}"
                )
            return f"{self.model_id}|backend=vllm|{self._vllm_identity}"
        return (
            f"{self.model_id}|dtype={dtype}|quant={self.spec.quantization or 'none'}"
            f"|decode=greedy|beams={self.num_beams}|max_new_tokens={self.max_new_tokens}"
            + ("" if self.batch_invariant else f"|batch={self.batch_size}")
        )

    @property
    def dtype_name(self) -> str:
        """The precision the weights run in, ``auto`` resolved for this machine: ``float32``, ``bfloat16``, ..."""
        return str(resolve_dtype(self.spec.dtype)).replace("torch.", "")

    @property
    def model_path(self) -> str:
        """The hub id or folder a transformers or vLLM reader loads (an offline model converted first)."""
        return resolve_pretrained(self.spec.pretrained, self.spec.offline_model, self.spec.models_dir)

    @property
    def batch_invariant(self) -> bool:
        """Whether a prompt's answer is independent of the batch it is generated in. Left padding
        reorders the attention sums: in float32 the last-token logits move by ~1e-5 (50 of 50 HotpotQA
        answers equal at batch 1 and 8), in bf16 by up to ~0.8 (8 of 50 changed). Half precision (also
        ``auto`` where it chooses bf16: harness.backends.precision) and quantized weights at batch_size > 1
        are therefore not invariant, and the batch size joins the reader id."""
        full_precision = str(resolve_dtype(self.spec.dtype)) == "torch.float32" and self.spec.quantization is None
        return full_precision or self.batch_size == 1

    @property
    def gguf_file(self) -> Path:
        """The GGUF a llama_cpp reader runs: ``gguf`` when set, else the offline model's file."""
        return resolve_gguf(self.gguf, self.spec.offline_model, self.spec.models_dir)

    @property
    def gguf_identity(self) -> str:
        """``gguf=<file name>:<sha256>|quant=<format>``. A ladder model's sha256 is the recorded one its
        assembly was verified against (so the id needs no file); any other GGUF is hashed once per process."""
        if self._gguf_identity is None:
            self._gguf_identity = gguf_identity(self.gguf, self.spec.offline_model, self.spec.models_dir)
        return self._gguf_identity

    def __repr__(self) -> str:
        return f"Reader(name={self.name!r}, id={self.reader_id!r})"

    # ---- tokenizer and prompts (no weights loaded) ---------------------------------------------

    @property
    def tokenizer(self):
        if self._tokenizer is None:
            if self.backend == "llama_cpp":
                self._tokenizer = load_gguf_tokenizer(self._llama_cpp_tokenizer_source())
            else:
                self._tokenizer = self.spec.load_tokenizer()
        return self._tokenizer

    def _llama_cpp_tokenizer_source(self) -> str | Path:
        """``tokenizer`` when set; else the offline model's tokenizer folder (converted from its GGUF
        once and kept); else the GGUF file itself (read on every load)."""
        return gguf_tokenizer_source(self.tokenizer_path, self.gguf, self.spec.offline_model, self.spec.models_dir)

    @property
    def token_counter(self) -> TokenCounter:
        if self._token_counter is None:
            self._token_counter = TokenCounter(self.tokenizer, name=self.model_id)
        return self._token_counter

    @property
    def add_special_tokens(self) -> bool:
        return add_special_tokens_for(self.prompt, self.tokenizer)

    def render_prompt(self, question: str, context_text: str) -> str:
        return self.prompt.render(self.tokenizer, question, context_text)

    def count_prompt_tokens(self, prompt: str) -> int:
        return count_prompt_tokens(self.tokenizer, prompt, add_special_tokens=self.add_special_tokens)

    def count_prompt_tokens_many(self, prompts: Sequence[str]) -> list[int]:
        return count_prompt_tokens_many(self.tokenizer, prompts, add_special_tokens=self.add_special_tokens)

    # ---- generation -----------------------------------------------------------------------------

    @property
    def module(self):
        """The ReaderModule, loading the weights on first use."""
        if self._module is None and self.backend in ("llama_cpp", "vllm"):
            from harness.read.module import ReaderModule

            generator = (
                LlamaCppGenerator(
                    self.gguf_file, self.tokenizer, self.max_new_tokens, self.llama_cpp, self.add_special_tokens
                )
                if self.backend == "llama_cpp"
                else VllmGenerator(
                    self.model_path,
                    self.tokenizer,
                    self.max_new_tokens,
                    self.dtype_name,
                    self.vllm,
                    self.add_special_tokens,
                    self.spec.trust_remote_code,
                )
            )
            self._module = ReaderModule(
                None,
                self.tokenizer,
                max_new_tokens=self.max_new_tokens,
                add_special_tokens=self.add_special_tokens,
                backend=generator,
            )
        if self._module is None:
            from harness.read.module import ReaderModule

            model, tokenizer = self.spec.load()
            if self._tokenizer is None:
                self._tokenizer = tokenizer
            self._module = ReaderModule(
                model,
                self.tokenizer,
                max_new_tokens=self.max_new_tokens,
                num_beams=self.num_beams,
                add_special_tokens=self.add_special_tokens,
                placed=self.spec.placed,
                torch_threads=resolve_threads(self.torch_threads, f"reader {self.name!r} (torch)"),
            )
        return self._module

    def cache_key(self, prompt: str) -> str:
        # An answer depends on the weights and decoding (reader_id), the exact prompt and the generation
        # code (harness/read): retrieval or packing code only matters through the prompt.
        return stable_hash(self.reader_id, code_fingerprint("read"), prompt)

    def answer(self, prompts: Sequence[str]) -> list[str]:
        """One short answer per prompt, aligned with ``prompts``; only uncached distinct prompts run."""
        return [response["answer"] for response in self.responses(prompts)]

    def responses(self, prompts: Sequence[str]) -> list[dict[str, str]]:
        """``{"answer", "raw"}`` per prompt, aligned with ``prompts``: the extracted short answer and the
        whole generation. Only uncached distinct prompts run."""
        prompts = list(prompts)
        self.requested += len(prompts)
        # ResponseCacheWriter commits each batch as Lightning finishes it.
        found, generated = self.response_cache.responses(prompts, self.cache_key, self._generate, commit=False)
        self.generated += generated
        return found

    def _trainer(self):
        """A predict-only Trainer. Several processes must be started by spawning or forking this one:
        a strategy that starts them by re-running the command (plain ``ddp``, torchrun, srun per task)
        would run the whole Hydra job once per process. ``auto`` with several devices becomes
        ``ddp_spawn``; an explicit unsafe strategy is refused."""
        import pytorch_lightning as pl
        from pytorch_lightning.strategies.launchers import _MultiProcessingLauncher

        from harness.read.module import ResponseCacheWriter

        def build(settings):
            return pl.Trainer(
                **settings,
                logger=False,
                enable_checkpointing=False,
                enable_progress_bar=self.show_progress,
                enable_model_summary=False,
                callbacks=[ResponseCacheWriter(self.cache)],
            )

        settings = dict(self.trainer_settings)
        trainer = build(settings)
        if trainer.world_size > 1 and not isinstance(trainer.strategy.launcher, _MultiProcessingLauncher):
            strategy = str(settings.get("strategy", "auto"))
            # No launcher: the processes were started outside (torchrun, srun), each running the whole job.
            if strategy != "auto" or trainer.strategy.launcher is None:
                raise _refuse_strategy(self.name, strategy, trainer.world_size)
            trainer = build(dict(settings, strategy="ddp_spawn"))
        return trainer

    def _generate(self, prompts: list[str], keys: list[str]) -> dict[str, dict[str, str]]:
        from pytorch_lightning.strategies.launchers import _MultiProcessingLauncher

        from harness.read.datamodule import PromptDataModule

        module = self.module
        lengths = [len(ids) for ids in self.tokenizer(prompts, add_special_tokens=self.add_special_tokens)["input_ids"]]
        if isinstance(module.backend, VllmGenerator):
            module.backend.reserve(max(lengths))  # one engine size for the whole job, not one per batch
        with _quiet_lightning():
            trainer = self._trainer()
        # Multi-process strategies cannot hand predictions back to this process: every rank writes its
        # share of the answers to the shared response cache instead, and they are read back below.
        multi_process = trainer.world_size > 1 or isinstance(trainer.strategy.launcher, _MultiProcessingLauncher)
        if multi_process and self.cache is None:
            raise ValueError(f"reader {self.name!r}: multi-device prediction needs a response cache (set cache_dir)")
        datamodule = PromptDataModule(
            prompts, keys, self.batch_size, lengths, self.sort_by_length, replicas=trainer.world_size
        )
        with _quiet_lightning():
            outputs = trainer.predict(module, datamodule=datamodule, return_predictions=not multi_process) or []
        answers = {
            row["prompt_key"]: {"answer": row["answer"], "raw": row["raw"]} for batch in outputs for row in batch
        }
        lacking = [k for k in keys if k not in answers]
        if lacking:
            # Under a multi-process strategy each rank returns its own share; all ranks wrote the cache.
            answers.update(self.response_cache.lookup(lacking))
        lacking = [k for k in keys if k not in answers]
        if lacking:
            raise RuntimeError(
                f"reader {self.name!r}: {len(lacking)} of {len(keys)} prompts came back without an answer"
            )
        return answers
