"""One kernel call for a packed prefill's attention over every prompt's own span (Triton; CUDA).

A packed prefill (``harness.read.row_decoding``) puts prompts end to end in one sequence; each must attend
causally over its own span alone. One ``scaled_dot_product_attention`` call per prompt kept the sums to the span
but cost ``layers x prompts`` calls per prefill (about 900 for 32 prompts of a 7B model), each launch-bound for a
short prompt. This kernel is one call per layer: program ``(prompt, head, query block)`` takes ``BLOCK_M`` queries
counted from the prompt's first token and walks the prompt's keys in blocks of ``BLOCK_N`` from its first key up
to the block's last query, with an online softmax in float32. Every block boundary is counted from the prompt's
own start, so what a query's output sums is fixed by its prompt and the block sizes: not by the prompts packed
before it, its offset in the chunk or the chunk's length, and a prompt's keys cannot change with its company.

Under ``TRITON_INTERPRET=1`` the same kernel runs on CPU tensors (float32), which is how the tests check it.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from harness.read.row_kernel import attend_block, load_tile, store_attention
from harness.read.row_keys import segment_bounds

BLOCK_M = 64  # queries per program, counted from the prompt's start: part of the arithmetic, so fixed
BLOCK_N = 64  # keys per step of the walk, likewise


# Strides change with the chunk's length; a variant compiled per divisibility would recompile mid-read.
@triton.jit(do_not_specialize=["q_head", "q_pos", "k_head", "k_pos", "v_head", "v_pos", "o_head", "o_pos"])
def _segments_prefill_attention(
    Q,
    K,
    V,
    Out,
    starts,
    ends,
    scale,
    q_head,
    q_pos,
    k_head,
    k_pos,
    v_head,
    v_pos,
    o_head,
    o_pos,
    GROUP: tl.constexpr,
    HEAD_DIM: tl.constexpr,
    BLOCK_D: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
):
    segment = tl.program_id(0)
    head = tl.program_id(1)
    block = tl.program_id(2)
    start = tl.load(starts + segment)
    end = tl.load(ends + segment)
    first_query = start + block * BLOCK_M
    if first_query < end:  # a shorter prompt has fewer query blocks than the grid's longest
        kv_head = head // GROUP
        m = first_query + tl.arange(0, BLOCK_M)
        d = tl.arange(0, BLOCK_D)
        query_mask = m < end
        dim_mask = d < HEAD_DIM
        tile_mask = query_mask[:, None] & dim_mask[None, :]
        q = load_tile(Q + head * q_head, m, q_pos, d, tile_mask)
        top = tl.full([BLOCK_M], float("-inf"), tl.float32)
        total = tl.zeros([BLOCK_M], tl.float32)
        acc = tl.zeros([BLOCK_M, BLOCK_D], tl.float32)
        last = tl.minimum(first_query + BLOCK_M, end)  # causal: no key after the block's last query
        for first_key in range(start, last, BLOCK_N):
            n = first_key + tl.arange(0, BLOCK_N)
            key_mask = n < end
            keys_mask = key_mask[:, None] & dim_mask[None, :]
            k = load_tile(K + kv_head * k_head, n, k_pos, d, keys_mask)
            v = load_tile(V + kv_head * v_head, n, v_pos, d, keys_mask)
            visible = (n[None, :] <= m[:, None]) & key_mask[None, :]  # causal, within the prompt
            top, total, acc = attend_block(q, k, v, visible, scale, top, total, acc)
        store_attention(Out + head * o_head, m, o_pos, d, tile_mask, total, acc)


def segments_prefill_attention(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    segments: list[tuple[int, int]],
    scale: float,
    bounds: torch.Tensor | None = None,
) -> torch.Tensor:
    """Causal attention of each packed prompt over its own span ``segments[i] = (start, end)`` of the one
    sequence; positions in no span (padding) get zeros. ``query`` is ``(1, heads, length, dim)``,
    ``key``/``value`` ``(1, kv_heads, length, dim)`` (contiguous last dimension); ``bounds``: the segments as an
    int32 ``(2, prompts)`` tensor on the device, when the caller keeps one. Returns ``query``'s shape."""
    batch, heads, length, dim = query.shape
    kv_heads = key.shape[1]
    if batch != 1 or heads % kv_heads:
        raise ValueError(f"one packed sequence and heads divisible by kv heads, got {tuple(query.shape)} / {kv_heads}")
    for name, tensor in (("query", query), ("key", key), ("value", value)):
        if tensor.stride(-1) != 1:
            raise ValueError(f"{name}'s last dimension must be contiguous")
    output = torch.zeros_like(query)
    if not segments:
        return output
    if bounds is None:
        bounds = segment_bounds(segments, query.device)
    longest = max(end - start for start, end in segments)
    _segments_prefill_attention[(len(segments), heads, triton.cdiv(longest, BLOCK_M))](
        query,
        key,
        value,
        output,
        bounds[0],
        bounds[1],
        float(scale),
        query.stride(1),
        query.stride(2),
        key.stride(1),
        key.stride(2),
        value.stride(1),
        value.stride(2),
        output.stride(1),
        output.stride(2),
        GROUP=heads // kv_heads,
        HEAD_DIM=dim,
        BLOCK_D=max(16, triton.next_power_of_2(dim)),
        BLOCK_M=BLOCK_M,
        BLOCK_N=BLOCK_N,
    )
    return output
