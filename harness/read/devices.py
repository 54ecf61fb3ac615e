"""Where a local reader computes: the CUDA it asked for and found, the device kind its answers depend on, and
the line the read stage opens with. Checked before any weights load (``harness.core.devices`` probes)."""

from __future__ import annotations

import logging
from collections.abc import MutableMapping
from typing import Any

from harness.backends.loading import ModelSpec
from harness.core.devices import CUDA_ACCELERATORS, CudaProbe, cuda_problem, probe_cuda, wants_cuda
from harness.core.process_starts import external_start

log = logging.getLogger("harness.read.local")


class ReaderDevices:
    """A reader's devices. ``trainer`` is the reader's own trainer settings: opting into the CPU rewrites its
    accelerator there."""

    def __init__(self, name: str, spec: ModelSpec, trainer: MutableMapping[str, Any], allow_cpu: bool) -> None:
        self.name = name
        self.spec = spec
        self.trainer = trainer
        self.allow_cpu = bool(allow_cpu)
        self._probe: CudaProbe | None = None

    @property
    def probe(self) -> CudaProbe:
        """This process's CUDA, probed once per reader."""
        if self._probe is None:
            self._probe = probe_cuda()
        return self._probe

    @probe.setter
    def probe(self, probe: CudaProbe) -> None:
        self._probe = probe

    @property
    def on_cuda(self) -> bool:
        """Whether the reader computes on CUDA GPUs: it asks for them, or leaves the choice to Lightning or a
        device map, and CUDA is usable."""
        accelerator = str(self.trainer.get("accelerator", "cpu")).lower()
        asks = accelerator in CUDA_ACCELERATORS or accelerator == "auto" or self.spec.device_map == "auto"
        return asks and self.probe.usable

    @property
    def kind(self) -> str:
        """Where answers are computed, as they can differ: ``cpu``, or ``cuda-sm80`` (the lowest compute
        capability among the visible devices: kernels are chosen by it)."""
        if not self.on_cuda:
            return "cpu"
        return min(self.probe.gpus, key=lambda gpu: gpu.capability).kind

    def check(self) -> None:
        """A reader asking for CUDA that has none stops here, unless it opted into the CPU (then it reads
        there, and says so); so does a job started as several processes from outside."""
        problem = cuda_problem(self.name, self.trainer, self.allow_cpu, self.probe)
        if problem:
            raise ValueError(problem)
        if wants_cuda(self.trainer) and not self.probe.usable:
            log.warning(
                "reader %s: no CUDA (%s); reading on the CPU (reader.allow_cpu=true)", self.name, self.probe.findings()
            )
            self.trainer["accelerator"] = "cpu"
        start = external_start()
        if start is not None:
            raise ValueError(start.refusal())

    def describe(self, dtype: str) -> str:
        """Device(s), dtype and placement, as the read stage's first line gives them."""
        devices = self.trainer.get("devices", 1)
        if self.on_cuda:
            where = self.probe.describe()
        else:
            where = f"cpu ({devices} process(es))" if str(devices) != "1" else "cpu"
        if self.spec.placed:
            how = f"placed at load (device_map={self.spec.device_map or 'auto/cpu'}, "
            how += f"quantization={self.spec.quantization})"
        else:
            how = f"Lightning, {self.trainer.get('accelerator')} x {devices}"
        return f"{where}; dtype {dtype}; {how}"
