"""``reader.max_memory``: how much of each GPU a device-mapped model may fill, and so over which GPUs it spreads.

transformers spreads a ``device_map`` model over every GPU in ``max_memory`` (all visible GPUs when it is
not given): ``auto``/``balanced`` evenly, ``sequential`` filling GPU 0 first. The harness takes it as a list,
one size per GPU in CUDA order (``[20GiB, 20GiB]``), or as a mapping of GPU index to size (``{0: 20GiB}``).
A size is bytes, or a number with a unit: ``GiB`` = 2**30 bytes, ``GB`` = 10**9 (as accelerate reads them).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

UNITS = {
    "b": 1,
    "kb": 10**3,
    "mb": 10**6,
    "gb": 10**9,
    "tb": 10**12,
    "kib": 2**10,
    "mib": 2**20,
    "gib": 2**30,
    "tib": 2**40,
}
_SIZE = re.compile(r"^\s*(?P<size>\d+(?:\.\d+)?)\s*(?P<unit>[kmgt]i?b|b)\s*$", re.IGNORECASE)


def parse_size(value: Any) -> int:
    """Bytes from an integer or from ``20GiB`` / ``24GB``; a ValueError naming the value otherwise."""
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is not a size")
    if isinstance(value, int):
        size = value
    else:
        match = _SIZE.match(str(value))
        if match is None:
            raise ValueError(f"{value!r} is not a size (write 20GiB, 24GB or a number of bytes)")
        size = int(float(match["size"]) * UNITS[match["unit"].lower()])
    if size <= 0:
        raise ValueError(f"{value!r} is not a positive size")
    return size


def max_memory_bytes(value: Any) -> dict[int, int] | None:
    """GPU index -> bytes from a list (one size per GPU, in order) or a mapping; None for null. The GPUs must
    be 0..N-1: a job sees its GPUs numbered from 0, whichever the node gave it."""
    if value is None:
        return None
    if isinstance(value, Mapping):
        items = [(key, size) for key, size in value.items()]
    elif isinstance(value, Sequence) and not isinstance(value, str):
        items = list(enumerate(value))
    else:
        raise ValueError(f"{value!r} is neither a list of sizes (one per GPU) nor a mapping of GPU index to size")
    limits: dict[int, int] = {}
    for key, size in items:
        try:
            index = int(key)
        except (TypeError, ValueError):
            raise ValueError(f"GPU {key!r} is not a GPU index") from None
        limits[index] = parse_size(size)
    if not limits:
        raise ValueError("it names no GPU")
    if sorted(limits) != list(range(len(limits))):
        raise ValueError(f"GPUs {sorted(limits)} are not 0..{len(limits) - 1}")
    return dict(sorted(limits.items()))


def max_memory_problem(reader: Mapping[str, Any]) -> str | None:
    """One line naming ``reader.max_memory`` when its value cannot be read."""
    try:
        max_memory_bytes(reader.get("max_memory"))
    except ValueError as error:
        return f"reader.max_memory={reader.get('max_memory')!r}: {error}"
    return None
