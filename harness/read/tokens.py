"""Token counting in the reader's own tokenizer: the unit of every budget."""

from __future__ import annotations

from functools import lru_cache


class TokenCounter:
    """Counts and truncates text in a Hugging Face tokenizer, without special tokens."""

    def __init__(self, tokenizer, name: str = "") -> None:
        self.tokenizer = tokenizer
        self.name = name or getattr(tokenizer, "name_or_path", "tokenizer")
        self._count = lru_cache(maxsize=200_000)(self._count_uncached)

    def _count_uncached(self, text: str) -> int:
        return len(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def count(self, text: str) -> int:
        return self._count(text)

    def count_many(self, texts: list[str]) -> list[int]:
        return [self._count(t) for t in texts]

    def truncate(self, text: str, max_tokens: int) -> str:
        """The longest token prefix of ``text`` whose decoding has at most ``max_tokens`` tokens."""
        if max_tokens <= 0:
            return ""
        ids = self.tokenizer(text, add_special_tokens=False)["input_ids"]
        n = min(max_tokens, len(ids))
        while n > 0:
            prefix = self.tokenizer.decode(ids[:n], skip_special_tokens=True).strip()
            if self.count(prefix) <= max_tokens:
                return prefix
            n -= 1
        return ""
