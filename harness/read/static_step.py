"""The row decoder's decoding step on fixed buffers, eager or captured as a CUDA graph.

The host's step (``harness.read.row_decoding``) slices the key cache at positions the host keeps, so each step's
kernels are launched with host values and no step can be captured. Here every position lives on the device: the
cache's layers write at ``write_at``, the attention kernel reads the keys' end from ``stop``, and the step advances
both, with the tokens and positions, in place. The host sets them once per run of steps and reads the chosen
tokens once at its end. The kernels and the keys they read are the host step's, so are the answers
(``tests/test_read_row_kernel.py``). A CUDA graph of the step replays it with no launch from the host per kernel;
it is captured again when a refill or a run's room replaces the cache's buffers.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from harness.read.row_cache import RowCache
from harness.read.row_keys import RowKeys


@dataclass
class StepInputs:
    """A decoding step's inputs and outputs on the device, changed in place: a step captured as a CUDA graph
    replays on whatever they hold."""

    tokens: torch.Tensor  # (width, 1) each row's last token; idle rows the padding token
    positions: torch.Tensor  # (width, 1) the next token's position; idle rows 0
    busy: torch.Tensor  # (width, 1) whether the row holds a prompt
    keys: RowKeys  # each row's first key in the whole buffer (absolute) and the keys' end
    write_at: torch.Tensor  # (1,) where this step's keys go
    chosen: torch.Tensor  # (width, sync_every) the tokens chosen in this run
    step: torch.Tensor  # (1,) the run's step, the column of ``chosen`` written next

    @classmethod
    def make(cls, width: int, sync_every: int, device: torch.device) -> StepInputs:
        def zeros(*shape: int, dtype=torch.long) -> torch.Tensor:
            return torch.zeros(shape, dtype=dtype, device=device)

        keys = RowKeys([None] * width, kernel=True, stop=zeros(1))
        keys._device_starts = zeros(width, dtype=torch.int32)
        return cls(zeros(width, 1), zeros(width, 1), zeros(width, 1, dtype=torch.bool), keys, zeros(1),
                   zeros(width, sync_every), zeros(1))  # fmt: skip


class StaticStep:
    """Runs of decoding steps of ``model`` on fixed buffers, ``width`` rows, at most ``sync_every`` steps a run;
    ``graph``: each step a replay of one captured CUDA graph."""

    def __init__(self, model, width: int, sync_every: int, pad: int, graph: bool) -> None:
        self.model, self.pad, self.graph = model, pad, graph
        self.inputs = StepInputs.make(width, sync_every, model.device)
        self._captured: tuple[tuple[int, ...], torch.cuda.CUDAGraph] | None = None  # on these buffers

    def run(self, last: list[int], positions: list[int], starts: list[int | None], shared: RowCache, steps: int):
        """``steps`` steps from each row's last token, next position and first key in ``shared``'s live keys
        (None: an idle row); returns each row's chosen tokens."""
        shared.reserve(steps)  # the run writes in place
        begin, end = shared.begins[0], shared.ends[0]
        if any(b != begin for b in shared.begins) or any(e != end for e in shared.ends):
            raise RuntimeError("the row cache's layers hold different spans")  # never: they move together
        inputs = self.inputs
        host = {
            inputs.tokens: [[token] for token in last],
            inputs.positions: [[position] for position in positions],
            inputs.busy: [[start is not None] for start in starts],
            inputs.keys.device_starts(inputs.tokens.device): [-1 if s is None else begin + s for s in starts],
            inputs.write_at: [end],
            inputs.keys.stop: [end + 1],
            inputs.step: [0],
        }
        for tensor, values in host.items():
            tensor.copy_(torch.tensor(values, dtype=tensor.dtype))
        shared.write_at = inputs.write_at
        try:
            for _ in range(steps):
                self._replay(shared) if self.graph else self._step(shared)
        finally:
            shared.write_at = None
        shared.advance(steps)
        return inputs.chosen[:, :steps].tolist()

    def _step(self, shared: RowCache) -> None:
        """One decoding step on the inputs in place: no host value enters it, so it can be captured."""
        inputs = self.inputs
        output = self.model(
            input_ids=inputs.tokens, position_ids=inputs.positions, cache=shared, use_cache=True, logits_to_keep=1,
            row_keys=inputs.keys,
        )  # fmt: skip
        chosen = output.logits[:, -1].argmax(dim=-1, keepdim=True)
        inputs.chosen.index_copy_(1, inputs.step, chosen)
        # Idle rows carry the padding token at position 0 throughout, as in the host's step.
        inputs.tokens.copy_(torch.where(inputs.busy, chosen, self.pad))
        inputs.positions.add_(inputs.busy)
        inputs.write_at.add_(1)
        inputs.keys.stop.add_(1)  # type: ignore[union-attr]
        inputs.step.add_(1)

    def _replay(self, shared: RowCache) -> None:
        """The step as a CUDA graph, captured on the cache's buffers after one eager step on a side stream (this
        run's step), as torch asks before a capture."""
        buffers = tuple(k.data_ptr() for k in shared.keys if k is not None)
        if self._captured is not None and self._captured[0] == buffers:
            self._captured[1].replay()
            return
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            self._step(shared)
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            self._step(shared)  # recorded, not run: the next steps replay it
        self._captured = (buffers, graph)
