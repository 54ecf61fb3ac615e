"""Type tests for config values, shared by the config checks of every layer (a bool is not a number here,
though Python counts it as an int)."""

from __future__ import annotations

import math
from typing import Any


def is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def is_number(value: Any) -> bool:
    """A finite int or float, not a bool."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
