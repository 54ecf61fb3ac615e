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
(on CUDA one kernel call per layer for all of them, ``harness.read.prefill_kernel``; elsewhere a library call per
prompt, the same shapes as its lone prefill), its positions start at 0, and the first answer
tokens are read from a fixed number of positions, so ``lm_head`` has a fixed ``M`` too. A prompt longer than the
chunk is prefilled alone, as every prompt is without the setting.

Decoding steps run ``sync_every`` at a time with every input on the device: each step's tokens are the last
step's argmax, positions advance on the device, and the host reads the chosen tokens once per run of steps. A
``.tolist()`` per step made the host wait for the device every token, so on a GPU the host's launch time and
the device's compute time added up instead of overlapping. A row whose answer ends inside a run goes on
decoding its own tokens to the run's end (its row alone: the other rows never see them) and the host keeps its
tokens up to the end; so ``sync_every`` changes when rows are refilled, never an answer. With ``step`` static or
graph the steps run on fixed buffers with every position on the device, and can be captured as a CUDA graph
(``harness.read.static_step``).

Only the decoding's arithmetic changes, not its rule: greedy, stopping at an end-of-sequence token or
``max_new_tokens``.
"""

from __future__ import annotations

from collections import deque
from contextlib import contextmanager
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

from harness.read.row_cache import RowCache, SegmentCache, empty_like
from harness.read.row_keys import RowKeys
from harness.read.row_settings import STEPS, uses_row_kernel
from harness.read.static_step import StaticStep

ATTENTION = "harness_rows"


def row_attention(module, query, key, value, attention_mask, scaling=None, dropout=0.0, row_keys=None, **kwargs):
    """Attention of each row over its own keys (``row_keys``), with no mask and no padding in any sum."""
    if row_keys is None:
        raise ValueError(f"the {ATTENTION!r} attention runs inside RowDecoder only (it needs row_keys)")
    if row_keys.segments is not None and row_keys.kernel:
        from harness.read.prefill_kernel import segments_prefill_attention

        scale = query.shape[-1] ** -0.5 if scaling is None else scaling
        bounds = row_keys.device_segments(query.device)
        output = segments_prefill_attention(query, key, value, row_keys.segments, scale, bounds=bounds)
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
        self._static: StaticStep | None = None  # made on the first run of a static or graph step
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
        last = [r.tokens[-1] if r else self.pad for r in rows]
        positions = [r.length if r else 0 for r in rows]
        starts = [r.start if r else None for r in rows]
        if self.step != "host":
            if self._static is None:
                self._static = StaticStep(self.model, self.width, self.sync_every, self.pad, self.step == "graph")
            return self._static.run(last, positions, starts, shared, steps)
        device = self.model.device
        tokens = torch.tensor([[token] for token in last], device=device)
        at = torch.tensor([[position] for position in positions], device=device)
        busy = torch.tensor([[start is not None] for start in starts], device=device)
        keys = RowKeys(starts, kernel=self.kernel)
        chosen = []
        for _ in range(steps):
            output = self.model(
                input_ids=tokens, position_ids=at, cache=shared, use_cache=True, logits_to_keep=1, row_keys=keys
            )
            step = output.logits[:, -1].argmax(dim=-1, keepdim=True)
            chosen.append(step)
            # Idle rows carry the padding token at position 0 throughout, as in a run of one step.
            tokens = torch.where(busy, step, self.pad)
            at = at + busy
        return torch.cat(chosen, dim=1).tolist()

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
