"""Small helpers the config checks share: dotted selection and "did you mean" (type tests:
``harness.core.values``)."""

from __future__ import annotations

import difflib
from typing import Any

from omegaconf import DictConfig


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
