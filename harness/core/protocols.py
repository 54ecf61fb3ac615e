"""The interfaces stages share, as structural types: what a stage calls, not which class provides it.

Tests pass small fakes (a word counter, a canned chat model, a hashing encoder) wherever the real
models go, so the stages type their services by these protocols rather than by the concrete classes:
``harness.retrieve.encoder.Encoder`` is a ``TextEncoder``, ``harness.text.tokens.TokenCounter`` and
``WordCounter`` are ``TokenMeasure``s, every ``harness.lm`` backend is a ``ChatLM``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np


@runtime_checkable
class ChatLM(Protocol):
    """Anything with ``chat(prompts, max_new_tokens) -> responses`` (one response per prompt, in order)."""

    def chat(self, prompts: list[str], max_new_tokens: int) -> list[str]: ...


class TextEncoder(Protocol):
    """Embeds questions and passages into one L2-normalised space (rows aligned with the texts)."""

    def encode_queries(self, texts: list[str]) -> np.ndarray: ...

    def encode_documents(self, texts: list[str]) -> np.ndarray: ...


class TokenMeasure(Protocol):
    """Counts and truncates text in one unit: the reader's tokens (every budget's unit) or words."""

    name: str

    def count(self, text: str) -> int: ...

    def count_many(self, texts: Sequence[str]) -> list[int]: ...

    def truncate(self, text: str, max_tokens: int) -> str: ...
