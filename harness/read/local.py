"""Readers that generate in this process, run through ``pl.Trainer.predict`` over a ``ReaderModule``.

The weights are named by the model keys of :class:`harness.backends.loading.ModelSpec` (``pretrained``,
``offline_model``, ``models_dir``, ``dtype``, ``quantization``, ``device_map``, ``trust_remote_code``),
given as keyword arguments like every other setting. Each backend (``harness.read.hf``,
``harness.read.llama_cpp``, ``harness.read.vllm``) supplies its id, tokenizer and generation module.
"""

from __future__ import annotations

import logging
import warnings
from abc import abstractmethod
from collections.abc import Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any, ClassVar

from harness.backends.loading import ModelSpec, dtype_name, resolve_pretrained
from harness.backends.precision import machine_cpu_kind
from harness.core.devices import device_count
from harness.read.answers import extract_answer
from harness.read.base import PromptRequest, Reader, Response
from harness.read.devices import ReaderDevices
from harness.read.prompt import PromptTemplate

log = logging.getLogger(__name__)

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
    count = device_count(trainer.get("devices", 1))
    return None if count is None else count * int(trainer.get("num_nodes", 1) or 1)


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


def placement_problem(name: str, spec: ModelSpec, trainer: Mapping[str, Any]) -> str | None:
    """A model placed at load time (a device map, bitsandbytes weights) cannot also be copied to one process
    per device: each copy would be placed by the map, not by its rank."""
    processes = _process_count(trainer)
    if not spec.placed or processes is None or processes <= 1:
        return None
    return (
        f"reader {name!r}: a model placed at load time (quantization={spec.quantization}, "
        f"device_map={spec.device_map}) cannot run as {processes} processes (reader.trainer.devices); "
        "spread one copy over the GPUs with reader.device_map=auto and reader.trainer.devices=1, "
        "or use a vLLM reader with reader.vllm.tensor_parallel_size"
    )


def device_field(kind: str) -> str:
    """The reader identity's device field: none on the CPU (the ids CPU caches were written under), the
    kind and compute capability on CUDA, so CPU and GPU answers never share an entry."""
    return "" if kind == "cpu" else f"|device={kind}"


def threads_field(threads: int | None) -> str:
    """The reader identity's thread field for :attr:`LocalReader.keyed_threads`. On a CPU in reduced precision
    the matmul kernels (oneDNN: AMX or AVX-512) split their sums by thread, so the same prompt read at 1 and at
    2 threads can get another bf16 answer (Qwen2.5-Coder-0.5B, 24 HotpotQA prompts, AMX: 3 differ through
    transformers with row decoding, 2 through vLLM's CPU build); float32 rounds the difference away (0 of 24
    for either), and a GPU's kernels do not split by CPU thread. Where it matters the count is keyed
    (``threads=``) and named in the numerics, like the batch."""
    return "" if threads is None else f"|threads={threads}"


def _check_counts(name: str, **counts: int) -> None:
    for key, value in counts.items():
        if value < 1:
            raise ValueError(f"reader {name!r}: {key} must be >= 1, got {value}")


def _cached_response(key: str, entry: Any) -> Response:
    """A cache entry as ``{"answer", "raw"}``, the answer extracted afresh from the raw generation, so
    entries written under older extraction rules read as if generated now."""
    if isinstance(entry, Mapping) and isinstance(entry.get("raw"), str):
        return {"answer": extract_answer(entry["raw"]), "raw": entry["raw"]}
    if isinstance(entry, Mapping) and isinstance(entry.get("answer"), str):
        return {"answer": entry["answer"], "raw": entry["answer"]}
    raise ValueError(f"response cache entry {key}: expected {{'answer', 'raw'}} strings, got {entry!r}")


class LocalReader(Reader):
    """The Lightning predict path the in-process backends share: settings, trainer, batches of prompts."""

    #: an engine backend's word for the bitsandbytes quantization and ``trainer.devices`` it refuses
    #: (and it decodes greedily, one beam); ``None``: the transformers backend takes them
    backend: ClassVar[str]
    engine_quantization: ClassVar[str | None] = None
    engine_devices: ClassVar[str | None] = None

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
        allow_cpu: bool = False,
        emulate_bf16: bool = False,
        **model: Any,
    ) -> None:
        spec = ModelSpec.from_config(model, owner=f"reader {name!r}")
        self.check_weights(spec, name)
        _check_counts(name, batch_size=batch_size, max_new_tokens=max_new_tokens, num_beams=num_beams)
        _check_counts(name, torch_threads=1 if torch_threads is None else torch_threads)  # None: the job's share
        trainer = dict(DEFAULT_TRAINER, **dict(trainer or {}))
        unknown = set(trainer) - TRAINER_KEYS
        if unknown:
            raise ValueError(
                f"reader {name!r}: unknown trainer settings {sorted(unknown)}; allowed {sorted(TRAINER_KEYS)}"
            )
        _check_strategy(name, trainer)
        self.check_engine_limits(name, spec, num_beams, trainer)
        placed = placement_problem(name, spec, trainer)
        if placed:
            raise ValueError(placed)
        super().__init__(name, max_new_tokens=max_new_tokens, prompt=prompt, cache_dir=cache_dir)
        self.spec = spec
        self.batch_size = int(batch_size)
        self.num_beams = int(num_beams)
        self.trainer_settings = {k: v for k, v in trainer.items() if v is not None}
        self.sort_by_length = sort_by_length
        self.show_progress = show_progress
        self.torch_threads = torch_threads
        self.devices = ReaderDevices(name, spec, self.trainer_settings, allow_cpu)
        self.emulate_bf16 = bool(emulate_bf16)  # bf16 on a CPU without bf16 instructions: harness.run.cpu_check
        self._module = None

    # ---- settings -------------------------------------------------------------------------------

    def check_weights(self, spec: ModelSpec, name: str) -> None:
        """Refuse settings that name no weights (a hub id or path, or an offline model)."""
        if spec.offline_model is None and not spec.pretrained:
            raise ValueError(f"reader {name!r} needs `pretrained` (hub id or path) or `offline_model`")

    @classmethod
    def check_engine_limits(cls, name: str, spec: ModelSpec, num_beams: int, trainer: Mapping[str, Any]) -> None:
        """An engine backend decodes greedily, reads its own quantization and places itself."""
        if cls.engine_quantization is None or cls.engine_devices is None:
            return
        backend = getattr(cls, "backend", cls.__name__)
        if num_beams != 1:
            raise ValueError(f"reader {name!r}: the {backend} backend decodes greedily; num_beams must be 1")
        if spec.quantization is not None or spec.kernels:
            setting = "kernels=true (hub kernels)" if spec.kernels else f"quantization={spec.quantization!r}"
            raise ValueError(f"reader {name!r}: {setting} is a transformers setting; {cls.engine_quantization}")
        if str(trainer.get("devices", 1)) != "1":
            raise ValueError(f"reader {name!r}: {cls.engine_devices}, not reader.trainer.devices")

    # ---- identity and weights -------------------------------------------------------------------

    @property
    def model_id(self) -> str:
        """The weights: an offline model by name (the same on every machine), else the hub id or path."""
        return self.spec.source

    @property
    def weights_format(self) -> str:
        """The weights' format: Hugging Face files, with their load-time quantization if any."""
        return "hf" + (f"-{self.spec.quantization}" if self.spec.quantization else "")

    @property
    def numerics(self) -> dict[str, str]:
        threads = "" if self.keyed_threads is None else f"-{self.keyed_threads}threads"
        device = self.device_kind if self.on_cuda else f"cpu-{machine_cpu_kind()}{threads}"
        return {"backend": self.backend, "weights": self.weights_format, "dtype": self.dtype_name, "device": device}

    @property
    def keyed_threads(self) -> int | None:
        """The CPU threads an answer depends on (:func:`threads_field`), or None where it depends on none."""
        return None

    @property
    def dtype_name(self) -> str:
        """The precision the weights run in, ``auto`` resolved for this machine: ``float32``, ``bfloat16``, ..."""
        return dtype_name(self.spec.dtype)

    @property
    def model_path(self) -> str:
        """The hub id or folder a transformers or vLLM reader loads (an offline model converted first)."""
        return resolve_pretrained(self.spec.pretrained, self.spec.offline_model, self.spec.models_dir)

    def load_tokenizer(self):
        return self.spec.load_tokenizer()

    @staticmethod
    def decode_entry(key: str, entry: Any) -> Response | None:
        return _cached_response(key, entry)

    # ---- generation -----------------------------------------------------------------------------

    @abstractmethod
    def build_module(self):
        """The ReaderModule that generates (loading the weights or starting the engine)."""

    def engine_module(self, generator):
        """The ReaderModule of an engine backend: no torch model, ``generator`` fed the counted token ids."""
        from harness.read.module import ReaderModule

        return ReaderModule(
            None,
            self.tokenizer,
            max_new_tokens=self.max_new_tokens,
            add_special_tokens=self.add_special_tokens,
            backend=generator,
        )

    @property
    def processes(self) -> int | None:
        """The processes the trainer settings start (None: Lightning decides, as for ``devices: -1``)."""
        return _process_count(self.trainer_settings)

    @property
    def on_cuda(self) -> bool:
        return self.devices.on_cuda

    @property
    def device_kind(self) -> str:
        return self.devices.kind

    def check_device(self) -> None:
        self.devices.check()

    def placement(self) -> str:
        return self.devices.describe(self.dtype_name)

    @property
    def module(self):
        """The ReaderModule, loading the weights on first use (after the device check)."""
        if self._module is None:
            self.check_device()
            log.info("read: reader %s on %s", self.name, self.placement())
            self._module = self.build_module()
        return self._module

    def close(self) -> None:
        """Let the weights (or the engine, which stops) go, and return CUDA's cached blocks."""
        module, self._module = self._module, None
        backend = getattr(module, "backend", None)
        if backend is not None and hasattr(backend, "close"):
            backend.close()
        del module
        if self.on_cuda:
            import torch

            torch.cuda.empty_cache()

    @property
    def prompts_per_step(self) -> int:
        """Prompts handed to the module per predict step (each step's answers are cached as it ends)."""
        return self.batch_size

    def prepare_module(self, module, lengths: list[int]) -> None:
        """Called before each read with the prompts' token counts (an engine sizes itself here)."""

    def _trainer(self):
        """A predict-only Trainer. Several processes must be started by spawning or forking this one:
        a strategy that starts them by re-running the command (plain ``ddp``) would run the whole Hydra job
        once per process, and starts from outside (torchrun, srun tasks) are refused by ``check_device``.
        ``auto`` with several devices becomes ``ddp_spawn``; an explicit unsafe strategy is refused.

        The processes this reader starts get their ranks from Lightning's own environment, never from a
        SLURM allocation's variables: in a one-task SLURM job Lightning would otherwise take the world size
        from ``SLURM_NTASKS`` (1) and refuse ``devices`` above ``--ntasks-per-node``."""
        import pytorch_lightning as pl
        from lightning_fabric.plugins.environments.lightning import LightningEnvironment
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
                plugins=[LightningEnvironment()],
            )

        settings = dict(self.trainer_settings)
        trainer = build(settings)
        if trainer.world_size > 1 and not isinstance(trainer.strategy.launcher, _MultiProcessingLauncher):
            strategy = str(settings.get("strategy", "auto"))
            if strategy != "auto":
                raise _refuse_strategy(self.name, strategy, trainer.world_size)
            trainer = build(dict(settings, strategy="ddp_spawn"))
        return trainer

    def _generate(self, requests: list[PromptRequest], keys: list[str]) -> dict[str, Response]:
        from pytorch_lightning.strategies.launchers import _MultiProcessingLauncher

        from harness.read.datamodule import PromptDataModule

        prompts = [self.render(request) for request in requests]
        module = self.module
        lengths = self.count_prompt_tokens_many(prompts)
        self.prepare_module(module, lengths)
        with _quiet_lightning():
            trainer = self._trainer()
        # Multi-process strategies cannot hand predictions back to this process: every rank writes its
        # share of the answers to the shared response cache instead, and they are read back below.
        multi_process = trainer.world_size > 1 or isinstance(trainer.strategy.launcher, _MultiProcessingLauncher)
        if multi_process and self.cache is None:
            raise ValueError(f"reader {self.name!r}: multi-device prediction needs a response cache (set cache_dir)")
        datamodule = PromptDataModule(
            prompts, keys, self.prompts_per_step, lengths, self.sort_by_length, replicas=trainer.world_size
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
