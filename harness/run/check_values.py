"""Small helpers the config checks share: type tests, dotted selection and "did you mean"."""

from __future__ import annotations

import difflib
import math
from typing import Any

from omegaconf import DictConfig


def is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def select(cfg: DictConfig, key: str) -> tuple[bool, Any]:
    node: Any = cfg
    for part in key.split("."):
        if not isinstance(node, DictConfig) or part not in node:
            return False, None
        node = node[part]
    return True, node


def closest(word: str, choices: Any, prefix: str = "") -> str:
    """The closest of ``choices`` to ``word`` (difflib) as "; did you mean 'PREFIX.CHOICE'?", or ""."""
    match = difflib.get_close_matches(str(word), [str(c) for c in choices], n=1)
    return f"; did you mean {prefix + match[0]!r}?" if match else ""
