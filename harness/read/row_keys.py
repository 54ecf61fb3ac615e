"""What each row attends to, handed to the row decoder's attention beside the model's inputs."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch


@dataclass
class RowKeys:
    """Handed to the attention beside the model's inputs: the first key of each row's own span in the
    shared cache (``None``: an idle row, whose output is zeros), and whether queries attend causally."""

    starts: list[int | None]
    causal: bool = False
    kernel: bool = False  # attention through the Triton kernels: a decoding step's, a packed prefill's
    segments: list[tuple[int, int]] | None = None  # a packed prefill: each prompt's span of the one row
    stop: torch.Tensor | None = None  # fixed buffers: the keys' end, on the device (else the buffer's length)
    _device_starts: torch.Tensor | None = field(default=None, repr=False)
    _device_segments: torch.Tensor | None = field(default=None, repr=False)

    def device_starts(self, device: torch.device) -> torch.Tensor:
        """The starts as one tensor on ``device`` (idle rows ``-1``), made once per step for every layer."""
        if self._device_starts is None:
            values = [-1 if start is None else start for start in self.starts]
            self._device_starts = torch.tensor(values, dtype=torch.int32, device=device)
        return self._device_starts

    def device_segments(self, device: torch.device) -> torch.Tensor:
        """The packed prompts' starts and ends as a ``(2, prompts)`` tensor on ``device``, made once per prefill
        for every layer (a copy to the device per layer would make the host wait each time)."""
        if self._device_segments is None:
            assert self.segments is not None
            self._device_segments = segment_bounds(self.segments, device)
        return self._device_segments


def segment_bounds(segments: list[tuple[int, int]], device: torch.device) -> torch.Tensor:
    """Spans ``(start, end)`` as an int32 ``(2, spans)`` tensor on ``device``: the starts, then the ends."""
    return torch.tensor(segments, dtype=torch.int32).T.contiguous().to(device)
