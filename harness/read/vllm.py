"""A reader running vLLM's offline engine (in a worker process, ``harness.backends.vllm_engine``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from harness.backends.vllm_engine import (
    VllmGenerator,
    VllmSettings,
    batch_invariant_mode,
    model_files_digest,
    reads_one_at_a_time,
    vllm_python,
    vllm_version,
)
from harness.core.threads import resolve_threads
from harness.read.local import LocalReader, device_field, threads_field


class VllmReader(LocalReader):
    """``vllm`` holds the engine settings (:class:`harness.backends.vllm_engine.VllmSettings`)."""

    backend = "vllm"
    engine_quantization = "a vllm reader names vLLM's own in reader.vllm.quantization (awq, gptq, bitsandbytes)"
    engine_devices = (
        "the vllm engine places itself; use reader.vllm.tensor_parallel_size or reader.vllm.data_parallel_size "
        "for several devices"
    )

    def __init__(self, name: str, vllm: Mapping[str, Any] | None = None, **settings: Any) -> None:
        super().__init__(name, **settings)
        self.vllm = VllmSettings.from_mapping(vllm)  # unknown keys fail here
        self._vllm_identity: str | None = None

    @property
    def reader_id(self) -> str:
        # vLLM schedules prompts into batches of its own (continuous batching), so no batch size here; where
        # that would change answers the engine reads one sequence at a time, and the identity says so.
        # The files' digest and vLLM's version are read once per reader, not once per cache key.
        if self._vllm_identity is None:
            self._vllm_identity = (
                f"files={model_files_digest(self.model_path)}|dtype={self.dtype_name}"
                f"|{self.vllm.identity(self.one_at_a_time, self.batch_invariant)}"
                f"|decode=greedy|max_new_tokens={self.max_new_tokens}"
                f"|vllm={vllm_version(vllm_python(self.vllm.python, cuda=self.on_cuda))}"
                + threads_field(self.keyed_threads)
                + device_field(self.device_kind)
            )
        return f"{self.model_id}|backend={self.backend}|{self._vllm_identity}"

    @property
    def batch_invariant(self) -> bool:
        """Whether the engine computes in vLLM's batch-invariant mode: ``vllm.batch_invariant``, unset: on CUDA
        of compute capability 8.0 and newer (:func:`harness.backends.vllm_setup.batch_invariant_mode`)."""
        capabilities = [gpu.capability for gpu in self.devices.probe.gpus] if self.on_cuda else []
        return batch_invariant_mode(self.vllm.batch_invariant, capabilities)

    @property
    def one_at_a_time(self) -> bool:
        return reads_one_at_a_time(cuda=self.on_cuda, batch_invariant=self.batch_invariant)

    @property
    def keyed_threads(self) -> int | None:
        full_precision = self.dtype_name == "float32" and self.vllm.quantization is None
        if full_precision or self.on_cuda:
            return None
        return resolve_threads(self.vllm.cpu_threads, "vLLM (CPU build)")

    def build_module(self):
        generator = VllmGenerator(
            self.model_path,
            self.tokenizer,
            self.max_new_tokens,
            self.dtype_name,
            self.vllm,
            self.add_special_tokens,
            self.spec.trust_remote_code,
            cuda_devices=len(self.devices.probe.gpus) if self.on_cuda else 0,
            batch_invariant=self.batch_invariant,
        )
        return self.engine_module(generator)

    def prepare_module(self, module, lengths: list[int]) -> None:
        module.backend.reserve(max(lengths))  # one engine size for the whole job, not one per batch
