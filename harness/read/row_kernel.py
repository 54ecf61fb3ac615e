"""One kernel call for a decoding step's attention over every row's own keys (Triton; CUDA).

Row decoding (``harness.read.row_decoding``) keeps the rows' keys right-aligned in one shared buffer, each row's
span starting where its prompt was placed. Attending over a row's span with one ``scaled_dot_product_attention``
call per row kept every sum to the row's own keys, but cost ``layers x rows`` calls per token (448 at 16 rows of a
7B model) and let the library pick a kernel, split and backend per call from the view it was handed (the shared
buffer's strides and length, which depend on the company). This kernel is one call per layer: program
``(row, kv_head)`` walks the row's span in blocks of ``BLOCK_N`` keys from the span's first key, with an online
softmax in float32, and writes the outputs of the query heads that share the kv head. What it computes for a row
is fixed by that row's query and keys and the block sizes alone: nothing about the other rows, the buffer's size
or the number of rows enters a sum, so an answer cannot change with its company by construction.

Under ``TRITON_INTERPRET=1`` the same kernel runs on CPU tensors (float32), which is how the tests check it.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

BLOCK_N = 64  # keys per step of the walk: part of the arithmetic, so fixed


@triton.jit
def attend_block(q, k, v, visible, scale, top, total, acc):
    """One block of keys and values into an online softmax in float32: the queries' running maximum score
    ``top``, sum of weights ``total`` and weighted values ``acc``, rescaled to the new maximum; keys not
    ``visible`` weigh nothing. Returns the three updated."""
    scores = tl.dot(q, tl.trans(k)).to(tl.float32) * scale
    scores = tl.where(visible, scores, float("-inf"))
    new_top = tl.maximum(top, tl.max(scores, 1))
    rescale = tl.exp(top - new_top)
    weights = tl.exp(scores - new_top[:, None])
    total = total * rescale + tl.sum(weights, 1)
    acc = acc * rescale[:, None] + tl.dot(weights.to(v.dtype), v).to(tl.float32)
    return new_top, total, acc


@triton.jit
def load_tile(base, rows, row_stride, columns, mask):
    """The tile of ``rows`` (``row_stride`` apart) by contiguous ``columns`` at ``base``; zeros where masked."""
    return tl.load(base + rows[:, None] * row_stride + columns[None, :], mask=mask, other=0.0)


@triton.jit
def store_attention(base, rows, row_stride, columns, mask, total, acc):
    """The online softmax's result, ``acc / total``, stored as a tile at ``base`` in the output's dtype."""
    out = acc / total[:, None]
    tl.store(base + rows[:, None] * row_stride + columns[None, :], out.to(base.dtype.element_ty), mask=mask)


# Triton compiles a variant per divisibility of its integer arguments; the length and strides change as the cache
# grows, and a recompile in the middle of a read costs a second each.
@triton.jit(
    do_not_specialize=[
        "end",
        "q_row",
        "q_head",
        "k_row",
        "k_head",
        "k_pos",
        "v_row",
        "v_head",
        "v_pos",
        "o_row",
        "o_head",
    ]
)
def _rows_decode_attention(
    Q,
    K,
    V,
    Out,
    starts,
    end,
    stop,
    scale,
    q_row,
    q_head,
    k_row,
    k_head,
    k_pos,
    v_row,
    v_head,
    v_pos,
    o_row,
    o_head,
    GROUP: tl.constexpr,
    BLOCK_G: tl.constexpr,
    HEAD_DIM: tl.constexpr,
    BLOCK_D: tl.constexpr,
    BLOCK_N: tl.constexpr,
    STOP_ON_DEVICE: tl.constexpr,
):
    row = tl.program_id(0)
    kv_head = tl.program_id(1)
    if STOP_ON_DEVICE:  # the keys' end read from memory: a captured step replays with the length it finds
        end = tl.load(stop)
    start = tl.load(starts + row)
    if start >= 0:  # an idle row (start -1) keeps the zeros its output was made with
        g = tl.arange(0, BLOCK_G)
        d = tl.arange(0, BLOCK_D)
        heads = kv_head * GROUP + g
        head_mask = g < GROUP
        dim_mask = d < HEAD_DIM
        tile_mask = head_mask[:, None] & dim_mask[None, :]
        q = load_tile(Q + row * q_row, heads, q_head, d, tile_mask)
        top = tl.full([BLOCK_G], float("-inf"), tl.float32)
        total = tl.zeros([BLOCK_G], tl.float32)
        acc = tl.zeros([BLOCK_G, BLOCK_D], tl.float32)
        for first in range(start, end, BLOCK_N):
            n = first + tl.arange(0, BLOCK_N)
            key_mask = n < end
            keys_mask = key_mask[:, None] & dim_mask[None, :]
            k = load_tile(K + row * k_row + kv_head * k_head, n, k_pos, d, keys_mask)
            v = load_tile(V + row * v_row + kv_head * v_head, n, v_pos, d, keys_mask)
            top, total, acc = attend_block(q, k, v, key_mask[None, :], scale, top, total, acc)
        store_attention(Out + row * o_row, heads, o_head, d, tile_mask, total, acc)


def rows_decode_attention(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    starts: torch.Tensor,
    scale: float,
    stop: torch.Tensor | None = None,
) -> torch.Tensor:
    """Attention of one new token per row over keys ``starts[row]:stop`` of ``key``/``value`` (``-1``: an idle
    row, output zeros). ``query`` is ``(rows, heads, 1, dim)``, ``key``/``value`` ``(rows, kv_heads, length, dim)``
    (any strides with a contiguous last dimension); ``stop``: a one-element integer tensor on the device (None:
    the buffer's length), read by the kernel, so that no length is fixed on the host. Returns
    ``(rows, heads, 1, dim)``."""
    rows, heads, steps, dim = query.shape
    kv_heads, length = key.shape[1], key.shape[2]
    if steps != 1 or heads % kv_heads:
        raise ValueError(f"one query per row and heads divisible by kv heads, got {tuple(query.shape)} / {kv_heads}")
    for name, tensor in (("query", query), ("key", key), ("value", value)):
        if tensor.stride(-1) != 1:
            raise ValueError(f"{name}'s last dimension must be contiguous")
    group = heads // kv_heads
    output = torch.zeros((rows, heads, dim), dtype=query.dtype, device=query.device)
    starts = starts.to(device=query.device, dtype=torch.int32)
    _rows_decode_attention[(rows, kv_heads)](
        query,
        key,
        value,
        output,
        starts,
        length,
        starts if stop is None else stop,  # not read without STOP_ON_DEVICE
        float(scale),
        query.stride(0),
        query.stride(1),
        key.stride(0),
        key.stride(1),
        key.stride(2),
        value.stride(0),
        value.stride(1),
        value.stride(2),
        output.stride(0),
        output.stride(1),
        GROUP=group,
        BLOCK_G=max(16, triton.next_power_of_2(group)),  # tl.dot takes blocks of 16 rows and more
        HEAD_DIM=dim,
        BLOCK_D=max(16, triton.next_power_of_2(dim)),
        BLOCK_N=BLOCK_N,
        STOP_ON_DEVICE=stop is not None,
    )
    return output[:, :, None, :]
