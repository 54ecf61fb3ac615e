"""What the row decoder's settings and identity need before any weights load, without importing torch: the
decoding steps it offers and the attention field of a reader's id. A reader is built, keyed and checked against
its cache in every run, also one that reads nothing (``read=false``) or finds every answer cached; the decoder
itself (``harness.read.row_decoding``, ``harness.read.static_step``) loads with the weights."""

from __future__ import annotations

import os

# How a decoding step runs: from the host's positions, on fixed device buffers, or replayed as a CUDA graph.
STEPS = ("host", "static", "graph")


def uses_row_kernel(device) -> bool:
    """Whether row decoding on ``device`` (a ``torch.device`` or its name) attends through the Triton kernel: on
    CUDA, when Triton imports, unless ``HARNESS_ROW_KERNEL=0`` asks for one library call per row (the reader id
    follows either way)."""
    if str(device).partition(":")[0] != "cuda" or os.environ.get("HARNESS_ROW_KERNEL", "1") == "0":
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
