"""Greedy decoding in which a prompt's answer never depends on the prompts read with it.

Batched generation with left padding is fast but batch-dependent in half precision: padding moves the
attention sums, and a matmul kernel chosen by the number of rows ``M`` rounds differently for other ``M``
(on an AMX CPU, bf16 ``x @ W.T`` with K = 4864 already differs between M = 1 and M = 2). Here each prompt
is prefilled alone (its own ``M``, no padding), and decoding advances a fixed number of rows, ``width``,
one token each per step: every linear layer always sees ``M = width``, a shape at which a row's result
was measured to be independent of its position and of the other rows (``tests/test_read_row_decoding.py``
checks it on the machine it runs on), and attention runs per row over that row's own keys only, so the
padding of the shared key cache never enters a sum. Rows free up as their answers end and take the next
prompt (continuous batching), and idle rows carry a dummy token, keeping ``M`` fixed to the end.

On CUDA a decoding step's attention is one Triton kernel call per layer (``harness.read.row_kernel``), whose sums
are fixed by each row's own keys; elsewhere, and where Triton is missing, it is one library call per row.

Prefilling prompts one at a time costs a forward each, launch-bound for short prompts on a GPU. With
``prefill_tokens`` set, prompts are packed end to end into one sequence of exactly that many tokens (the rest
padding), so every linear layer of every prefill sees the same ``M``; each prompt attends over its own span alone
(a library call per prompt, the same shapes as its lone prefill), its positions start at 0, and the first answer
tokens are read from a fixed number of positions, so ``lm_head`` has a fixed ``M`` too. A prompt longer than the
chunk is prefilled alone, as every prompt is without the setting.

Decoding steps run ``sync_every`` at a time with every input on the device: each step's tokens are the last
step's argmax, positions advance on the device, and the host reads the chosen tokens once per run of steps. A
``.tolist()`` per step made the host wait for the device every token, so on a GPU the host's launch time and
the device's compute time added up instead of overlapping. A row whose answer ends inside a run goes on
decoding its own tokens to the run's end (its row alone: the other rows never see them) and the host keeps its
tokens up to the end; so ``sync_every`` changes when rows are refilled, never an answer.

Only the decoding's arithmetic changes, not its rule: greedy, stopping at an end-of-sequence token or
``max_new_tokens``.
"""

from __future__ import annotations

import os
from collections import deque
from contextlib import contextmanager
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

from harness.read.row_cache import RowCache, SegmentCache, empty_like

ATTENTION = "harness_rows"


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

    def device_starts(self, device: torch.device) -> torch.Tensor:
        """The starts as one tensor on ``device`` (idle rows ``-1``), made once per step for every layer."""
        if self._device_starts is None:
            values = [-1 if start is None else start for start in self.starts]
            self._device_starts = torch.tensor(values, dtype=torch.int32, device=device)
        return self._device_starts


def row_attention(module, query, key, value, attention_mask, scaling=None, dropout=0.0, row_keys=None, **kwargs):
    """Attention of each row over its own keys (``row_keys``), with no mask and no padding in any sum."""
    if row_keys is None:
        raise ValueError(f"the {ATTENTION!r} attention runs inside RowDecoder only (it needs row_keys)")
    if row_keys.segments is not None and row_keys.kernel:
        from harness.read.prefill_kernel import segments_prefill_attention

        scale = query.shape[-1] ** -0.5 if scaling is None else scaling
        output = segments_prefill_attention(query, key, value, row_keys.segments, scale)
        return output.transpose(1, 2).contiguous(), None
    if row_keys.segments is not None:
        return _segment_attention(query, key, value, row_keys.segments, scaling), None
    if row_keys.kernel and not row_keys.causal:
        from harness.read.row_kernel import rows_decode_attention

        scale = query.shape[-1] ** -0.5 if scaling is None else scaling
        starts = row_keys.device_starts(query.device)
        output = rows_decode_attention(query, key, value, starts, scale, stop=row_keys.stop)
        return output.transpose(1, 2).contiguous(), None
    output = torch.zeros_like(query)
    for row, start in enumerate(row_keys.starts):
        if start is not None:
            output[row : row + 1] = _attend(
                query[row : row + 1], key[row : row + 1, :, start:], value[row : row + 1, :, start:],
                row_keys.causal, scaling,
            )  # fmt: skip
    return output.transpose(1, 2).contiguous(), None


def _segment_attention(query, key, value, segments: list[tuple[int, int]], scaling) -> torch.Tensor:
    """Causal attention of each packed prompt over its own span; padding positions get zeros."""
    output = torch.zeros_like(query)
    for start, end in segments:
        span = slice(start, end)
        output[:, :, span] = _attend(query[:, :, span], key[:, :, span], value[:, :, span], True, scaling)
    return output.transpose(1, 2).contiguous()


def _attend(query, key, value, causal: bool, scaling) -> torch.Tensor:
    """One library attention call over the keys it is handed (grouped-query heads shared as the model has them)."""
    return F.scaled_dot_product_attention(
        query, key, value, is_causal=causal, scale=scaling, enable_gqa=query.shape[1] != key.shape[1]
    )


def register_row_attention() -> None:
    from transformers import AttentionInterface

    # No mask function is registered with it, so the model builds no mask: ``row_keys`` says what each
    # row attends to.
    AttentionInterface.register(ATTENTION, row_attention)


@contextmanager
def row_attention_for(model):
    """The model computes with ``row_attention`` inside the block and as it did before afterwards."""
    register_row_attention()
    previous = model.config._attn_implementation
    model.set_attn_implementation(ATTENTION)
    try:
        yield
    finally:
        model.set_attn_implementation(previous)


STEPS = ("host", "static", "graph")


@dataclass
class _StepInputs:
    """A decoding step's inputs and outputs on the device, changed in place (``static`` and ``graph`` steps): a
    step captured as a CUDA graph replays on whatever they hold. Set by the host once per run of steps."""

    tokens: torch.Tensor  # (width, 1) each row's last token; idle rows the padding token
    positions: torch.Tensor  # (width, 1) the next token's position; idle rows 0
    busy: torch.Tensor  # (width, 1) whether the row holds a prompt
    keys: RowKeys  # each row's first key in the whole buffer (absolute) and the keys' end
    write_at: torch.Tensor  # (1,) where this step's keys go
    chosen: torch.Tensor  # (width, sync_every) the tokens chosen in this run
    step: torch.Tensor  # (1,) the run's step, the column of ``chosen`` written next

    @classmethod
    def make(cls, width: int, sync_every: int, device: torch.device) -> _StepInputs:
        def zeros(*shape: int, dtype=torch.long) -> torch.Tensor:
            return torch.zeros(shape, dtype=dtype, device=device)

        keys = RowKeys([None] * width, kernel=True, stop=zeros(1))
        keys._device_starts = zeros(width, dtype=torch.int32)
        return cls(zeros(width, 1), zeros(width, 1), zeros(width, 1, dtype=torch.bool), keys, zeros(1),
                   zeros(width, sync_every), zeros(1))  # fmt: skip


@dataclass
class _Row:
    index: int  # the prompt's position in the call
    start: int  # its first key in the shared cache
    length: int  # its tokens in the cache (prompt and generated), the next token's position
    tokens: list[int] = field(default_factory=list)


class RowDecoder:
    """Greedy decoding of a causal LM, ``width`` rows at a time (see the module docstring)."""

    def __init__(
        self,
        model,
        width: int,
        max_new_tokens: int,
        eos_token_ids: set[int],
        pad_token_id: int = 0,
        kernel: bool | None = None,
        prefill_tokens: int = 0,
        sync_every: int | None = None,
        step: str = "host",
    ):
        """``kernel``: the decoding steps' attention through the Triton kernel (None: on CUDA when Triton is
        installed, see :func:`uses_row_kernel`). ``prefill_tokens``: the packed prefill's length (0: each
        prompt prefilled alone). ``sync_every``: decoding steps between two reads of the chosen tokens by the
        host (None: :func:`default_sync_every` for the model's device). ``step``: ``host`` (the cache's
        positions kept by the host, buffers sized to the live keys), ``static`` (fixed buffers for a run of steps,
        every position on the device: the same kernels on the same keys, so the same answers) or ``graph`` (the
        static step captured as a CUDA graph and replayed, no launch from the host per kernel; CUDA only)."""
        if step not in STEPS:
            raise ValueError(f"step must be one of {STEPS}, got {step!r}")
        if width < 1:
            raise ValueError(f"decoding width must be >= 1, got {width}")
        if prefill_tokens < 0:
            raise ValueError(f"prefill_tokens must be >= 0, got {prefill_tokens}")
        sync_every = default_sync_every(model.device) if sync_every is None else sync_every
        if sync_every < 1:
            raise ValueError(f"sync_every must be >= 1, got {sync_every}")
        self.sync_every = sync_every
        self.prefill_tokens = prefill_tokens
        self.kernel = uses_row_kernel(model.device) if kernel is None else kernel
        if step != "host" and not self.kernel:
            raise ValueError(f"the {step!r} decoding step reads its keys' end on the device: it needs the row kernel")
        if step == "graph" and torch.device(model.device).type != "cuda":
            raise ValueError("the 'graph' decoding step is captured as a CUDA graph: it runs on CUDA only")
        self.step = step
        self._inputs: _StepInputs | None = None
        self._graph = None  # (the buffers it was captured on, the CUDA graph)
        self.model = model
        self.width = width
        self.max_new_tokens = max_new_tokens
        self.eos = eos_token_ids
        self.pad = pad_token_id
        self.layers = model.config.num_hidden_layers

    def _forward(self, tokens: torch.Tensor, positions: torch.Tensor, keys: RowKeys, cache: RowCache) -> list[int]:
        output = self.model(
            input_ids=tokens, position_ids=positions, cache=cache, use_cache=True, logits_to_keep=1, row_keys=keys
        )
        return output.logits[:, -1].argmax(dim=-1).tolist()

    def _prefill(self, ids: list[int]) -> tuple[RowCache, int]:
        device = self.model.device
        cache = RowCache(self.layers)
        tokens = torch.tensor([ids], device=device)
        positions = torch.arange(len(ids), device=device)[None]
        (first,) = self._forward(tokens, positions, RowKeys([0], causal=True), cache)
        return cache, first

    def _prefill_packed(self, prompts: list[list[int]]) -> list[tuple[SegmentCache, int]]:
        """Prompts of at most ``prefill_tokens`` tokens together, at most ``width`` of them, in one forward
        of exactly ``prefill_tokens`` tokens (see the module docstring)."""
        device = self.model.device
        tokens, positions, segments = [], [], []
        for ids in prompts:
            segments.append((len(tokens), len(tokens) + len(ids)))
            tokens += ids
            positions += range(len(ids))
        padding = self.prefill_tokens - len(tokens)
        last = [end - 1 for _, end in segments] + [self.prefill_tokens - 1] * (self.width - len(segments))
        cache = RowCache(self.layers)
        output = self.model(
            input_ids=torch.tensor([tokens + [self.pad] * padding], device=device),
            position_ids=torch.tensor([positions + [0] * padding], device=device),
            cache=cache,
            use_cache=True,
            logits_to_keep=torch.tensor(last, device=device),
            row_keys=RowKeys([0], causal=True, kernel=self.kernel, segments=segments),
        )
        firsts = output.logits[0, : len(segments)].argmax(dim=-1).tolist()
        return [(SegmentCache(cache, start, end), first) for (start, end), first in zip(segments, firsts, strict=True)]

    def _prefilled(self, prompts: list[list[int]]) -> list[tuple[RowCache | SegmentCache, int]]:
        """Each prompt's keys and first token: alone, or packed ``prefill_tokens`` at a time in their order."""
        if not self.prefill_tokens:
            return [self._prefill(ids) for ids in prompts]
        done: list[tuple[RowCache | SegmentCache, int]] = []
        packed: list[list[int]] = []
        filled = 0  # tokens in ``packed``
        for ids in prompts:
            if packed and (filled + len(ids) > self.prefill_tokens or len(packed) == self.width):
                done += self._prefill_packed(packed)
                packed, filled = [], 0
            if len(ids) > self.prefill_tokens:
                done.append(self._prefill(ids))
            else:
                packed.append(ids)
                filled += len(ids)
        return done + (self._prefill_packed(packed) if packed else [])

    def _refill_now(self, rows: list[_Row | None]) -> bool:
        """Whether to prefill into the free rows now. A packed prefill costs a whole chunk however few prompts
        it holds, so it waits until half the rows are free; only speed depends on this."""
        free = rows.count(None)
        return free > 0 and (not self.prefill_tokens or free * 2 >= self.width)

    def _decode(self, rows: list[_Row | None], shared: RowCache) -> list[list[int]]:
        """A run of decoding steps (``sync_every``, fewer where every row's answer reaches ``max_new_tokens``
        sooner) with tokens and positions on the device; each row's chosen tokens, read by the host once."""
        steps = min(self.sync_every, max(self.max_new_tokens - len(r.tokens) for r in rows if r))
        if self.step != "host":
            return self._decode_static(rows, shared, steps)
        device = self.model.device
        tokens = torch.tensor([[r.tokens[-1] if r else self.pad] for r in rows], device=device)
        positions = torch.tensor([[r.length if r else 0] for r in rows], device=device)
        busy = torch.tensor([[r is not None] for r in rows], device=device)
        keys = RowKeys([r.start if r else None for r in rows], kernel=self.kernel)
        chosen = []
        for _ in range(steps):
            output = self.model(
                input_ids=tokens, position_ids=positions, cache=shared, use_cache=True, logits_to_keep=1, row_keys=keys
            )
            step = output.logits[:, -1].argmax(dim=-1, keepdim=True)
            chosen.append(step)
            # Idle rows carry the padding token at position 0 throughout, as in a run of one step.
            tokens = torch.where(busy, step, self.pad)
            positions = positions + busy
        return torch.cat(chosen, dim=1).tolist()

    def _decode_static(self, rows: list[_Row | None], shared: RowCache, steps: int) -> list[list[int]]:
        """The run on fixed buffers: the host sets the step's inputs once, then each step (eager, or the captured
        graph replayed) reads and advances them on the device."""
        device = self.model.device
        shared.reserve(steps)
        if self._inputs is None:
            self._inputs = _StepInputs.make(self.width, self.sync_every, device)
        inputs, begin = self._inputs, shared.begins[0]
        if any(b != begin for b in shared.begins) or any(e != shared.ends[0] for e in shared.ends):
            raise RuntimeError("the row cache's layers hold different spans")  # never: they move together
        host = {
            inputs.tokens: [[r.tokens[-1] if r else self.pad] for r in rows],
            inputs.positions: [[r.length if r else 0] for r in rows],
            inputs.busy: [[r is not None] for r in rows],
            inputs.keys.device_starts(device): [begin + r.start if r else -1 for r in rows],
            inputs.write_at: [shared.ends[0]],
            inputs.keys.stop: [shared.ends[0] + 1],
            inputs.step: [0],
        }
        for tensor, values in host.items():
            tensor.copy_(torch.tensor(values, dtype=tensor.dtype))
        shared.write_at = inputs.write_at
        try:
            for _ in range(steps):
                if self.step == "graph":
                    self._replay(inputs, shared)
                else:
                    self._static_step(inputs, shared)
        finally:
            shared.write_at = None
        shared.advance(steps)
        return inputs.chosen[:, :steps].tolist()

    def _static_step(self, inputs: _StepInputs, shared: RowCache) -> None:
        """One decoding step on the inputs in place: no host value enters it, so it can be captured."""
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

    def _replay(self, inputs: _StepInputs, shared: RowCache) -> None:
        """The static step as a CUDA graph: captured on the cache's buffers (again when a refill or a run's room
        replaced them), after one eager step on a side stream, which is this run's step, as torch asks before a
        capture."""
        buffers = tuple(k.data_ptr() for k in shared.keys if k is not None)
        if self._graph is not None and self._graph[0] == buffers:
            self._graph[1].replay()
            return
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            self._static_step(inputs, shared)
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            self._static_step(inputs, shared)  # recorded, not run: the next steps replay it
        self._graph = (buffers, graph)

    def _finished(self, row: _Row) -> bool:
        return row.tokens[-1] in self.eos or len(row.tokens) >= self.max_new_tokens

    def generate(self, prompts: list[list[int]]) -> list[list[int]]:
        """The generated token ids of each prompt (its end-of-sequence token included when reached)."""
        with torch.inference_mode(), row_attention_for(self.model):
            return self._generate(prompts)

    def _generate(self, prompts: list[list[int]]) -> list[list[int]]:
        results: list[list[int]] = [[] for _ in prompts]
        pending = deque(range(len(prompts)))
        rows: list[_Row | None] = [None] * self.width
        shared: RowCache | None = None
        while pending or any(rows):
            while pending and self._refill_now(rows):
                chosen = [pending.popleft() for _ in range(min(rows.count(None), len(pending)))]
                for index, (prompt_cache, first) in zip(
                    chosen, self._prefilled([prompts[i] for i in chosen]), strict=True
                ):
                    row = _Row(index, 0, len(prompts[index]), [first])
                    if self._finished(row):
                        results[index] = row.tokens
                        continue
                    if shared is None:
                        shared = empty_like(prompt_cache, self.width)
                    before = shared.length
                    slot = rows.index(None)
                    row.start = shared.place(slot, prompt_cache)
                    for other in rows:
                        if other is not None:
                            other.start += shared.length - before
                    rows[slot] = row
            if shared is None or not any(rows):
                break
            chosen = self._decode(rows, shared)
            for slot, row in enumerate(rows):
                if row is None:
                    continue
                for token in chosen[slot]:
                    row.tokens.append(token)
                    row.length += 1
                    if self._finished(row):  # the run's later tokens of this row are dropped
                        results[row.index] = row.tokens
                        rows[slot] = None
                        break
            first_used = min((r.start for r in rows if r), default=shared.length)
            if first_used:
                shared.drop_front(first_used)
                for row in rows:
                    if row is not None:
                        row.start -= first_used
        return results


# Decoding steps between two reads by the host on a GPU: the host queues this many steps ahead of the device, and
# a row whose answer ended waits at most this many steps for the next prompt.
CUDA_SYNC_EVERY = 8


def default_sync_every(device: torch.device | str) -> int:
    """Decoding steps per read by the host: 1 on a CPU, where the host computes the steps itself and a step
    past an answer's end is only work, ``CUDA_SYNC_EVERY`` elsewhere."""
    return 1 if torch.device(device).type == "cpu" else CUDA_SYNC_EVERY


def uses_row_kernel(device: torch.device | str) -> bool:
    """Whether row decoding on ``device`` attends through the Triton kernel: on CUDA, when Triton imports,
    unless ``HARNESS_ROW_KERNEL=0`` asks for one library call per row (the reader id follows either way)."""
    if torch.device(device).type != "cuda" or os.environ.get("HARNESS_ROW_KERNEL", "1") == "0":
        return False
    try:
        import triton  # noqa: F401
    except ImportError:
        return False
    return True


def row_attention_field(device: str, packed: bool = False) -> str:
    """The reader identity's field for the attention on ``device``: the decoding steps' kernel and its block, and
    with a packed prefill (``packed``) the prefill's kernel and its blocks."""
    if not uses_row_kernel("cuda" if device.startswith("cuda") else "cpu"):
        return ""
    from harness.read import prefill_kernel
    from harness.read.row_kernel import BLOCK_N

    prefill = f"|prefill_attn=triton{prefill_kernel.BLOCK_M}x{prefill_kernel.BLOCK_N}" if packed else ""
    return f"|attn=triton{BLOCK_N}{prefill}"
