"""Counting and truncating text in tokens: the reader's own tokenizer (the unit of every budget) or
whitespace words.

``WordCounter`` approximates reader tokens (English prose runs about 1.3 subword tokens per word);
``TokenCounter`` counts exactly in a Hugging Face tokenizer; ``resolve_token_counter(name)`` builds the
one a config names. Both share one interface: ``name``, ``count``, ``count_many``, ``truncate``.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from harness.core.threads import default_threads

# Counts kept per counter: a sweep re-costs the same sentences in every job that sees their pool.
COUNT_MEMO_SIZE = 500_000


# A batch at least this long is encoded by several threads: the Rust backend lets go of the GIL while it
# encodes, so the threads run at once. The library's own thread pool stays off (TOKENIZERS_PARALLELISM=false,
# set by the command line) so that no forked worker inherits a Rust pool whose threads did not survive the fork.
PARALLEL_MIN_TEXTS = 64
_encoding_pool: tuple[int, int, ThreadPoolExecutor] | None = None  # (pid, threads, pool)


def _encoding_threads() -> tuple[ThreadPoolExecutor, int] | None:
    """This process's encoding threads and how many (this job's share of the CPUs), or None with one CPU to
    its share. Made anew in a forked child, whose copy of its parent's pool has no threads."""
    global _encoding_pool
    threads = default_threads()
    if threads < 2:
        return None
    if _encoding_pool is None or _encoding_pool[:2] != (os.getpid(), threads):
        _encoding_pool = (os.getpid(), threads, ThreadPoolExecutor(threads, thread_name_prefix="encode"))
    return _encoding_pool[2], threads


def encoded_lengths(tokenizer, texts: Sequence[str], add_special_tokens: bool = False) -> list[int]:
    """How many tokens ``tokenizer`` makes of each text, each encoded on its own, unpadded.

    A fast tokenizer is asked through its Rust backend's ``encode_batch_fast``, which skips the character
    offsets and the ``BatchEncoding`` that the Python call builds: the same ids, a quarter less time, and
    counting prompts and contexts was the largest share of a reader-free sweep. A long batch is split over
    the job's CPUs (``PARALLEL_MIN_TEXTS``). The Python call re-applies its truncation, padding and
    special-token settings to the backend on every call, so the direct call is taken only while the backend
    holds exactly what that call would set (no truncation, no padding, the tokenizer's own
    ``split_special_tokens``).
    """
    if not texts:
        return []
    backend = getattr(tokenizer, "backend_tokenizer", None) if getattr(tokenizer, "is_fast", False) else None
    if not (
        backend is not None
        and hasattr(backend, "encode_batch_fast")
        and backend.truncation is None
        and backend.padding is None
        and backend.encode_special_tokens == bool(getattr(tokenizer, "split_special_tokens", False))
    ):
        return [len(ids) for ids in tokenizer(list(texts), add_special_tokens=add_special_tokens)["input_ids"]]

    def lengths(part: Sequence[str]) -> list[int]:
        return [len(e.ids) for e in backend.encode_batch_fast(list(part), add_special_tokens=add_special_tokens)]

    threads = _encoding_threads() if len(texts) >= PARALLEL_MIN_TEXTS else None
    if threads is None:
        return lengths(texts)
    pool, count = threads
    step = -(-len(texts) // count)
    parts = [texts[i : i + step] for i in range(0, len(texts), step)]
    return [n for part in pool.map(lengths, parts) for n in part]


class TokenCounter:
    """Counts and truncates text in a Hugging Face tokenizer, without special tokens."""

    def __init__(self, tokenizer, name: str = "") -> None:
        self.tokenizer = tokenizer
        self.name = name or getattr(tokenizer, "name_or_path", "tokenizer")
        self._counts: dict[str, int] = {}

    def count(self, text: str) -> int:
        return self.count_many([text])[0]

    def count_many(self, texts: Sequence[str]) -> list[int]:
        """Counts of ``texts``; the ones not seen before are encoded in one batch call (a fast tokenizer
        encodes a batch in Rust, several times faster than one call per text; each text is encoded on its
        own, without padding, so a count does not depend on its batch)."""
        counts = self._counts
        missing = [t for t in dict.fromkeys(texts) if t not in counts]
        if not missing:
            return [counts[t] for t in texts]
        fresh = dict(zip(missing, encoded_lengths(self.tokenizer, missing), strict=True))
        out = [fresh[t] if t in fresh else counts[t] for t in texts]
        if len(counts) + len(fresh) > COUNT_MEMO_SIZE:
            counts.clear()  # rare; a bounded memo must not grow with every sweep job
        counts.update(fresh)
        return out

    def truncate(self, text: str, max_tokens: int) -> str:
        """The longest prefix of ``text`` that ends on a token boundary, is made of whole characters and
        counts at most ``max_tokens`` tokens on its own.

        Byte-level tokenizers split a multi-byte character (Armenian, CJK) over several tokens, so a
        cut after an arbitrary token decodes to U+FFFD. A fast tokenizer's character offsets give cuts
        that are prefixes of the original string, hence whole characters; a slow one falls back to
        decoding and rejects prefixes that gained a U+FFFD the text did not have.
        """
        if max_tokens <= 0 or not text:
            return ""
        if getattr(self.tokenizer, "is_fast", False):
            encoded = self.tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
            ends = [end for _, end in encoded["offset_mapping"]]
            for n in range(min(max_tokens, len(ends)), 0, -1):
                prefix = text[: ends[n - 1]].rstrip()
                if prefix and self.count(prefix) <= max_tokens:
                    return prefix
            return ""
        ids = self.tokenizer(text, add_special_tokens=False)["input_ids"]
        replacement_allowed = "\ufffd" in text
        for n in range(min(max_tokens, len(ids)), 0, -1):
            prefix = self.tokenizer.decode(ids[:n], skip_special_tokens=True).strip()
            if not replacement_allowed and "\ufffd" in prefix:
                continue
            if prefix and self.count(prefix) <= max_tokens:
                return prefix
        return ""


class WordCounter:
    """Counts and truncates text in whitespace-separated words (the ``TokenCounter`` interface)."""

    name = "whitespace-words"

    def count(self, text: str) -> int:
        return len(text.split())

    def count_many(self, texts: Sequence[str]) -> list[int]:
        return [len(t.split()) for t in texts]

    def truncate(self, text: str, max_tokens: int) -> str:
        if max_tokens <= 0:
            return ""
        return " ".join(text.split()[:max_tokens])


def resolve_token_counter(tokenizer: str | None = None, models_dir: str | Path = ".cache/models"):
    """The counter that loaders chunk with.

    ``None`` or ``"words"``: whitespace words. ``"offline:NAME"``: the tokenizer of a packaged offline
    model (converted into ``models_dir`` on first use). Anything else: a hub id or a local tokenizer
    folder, loaded with ``AutoTokenizer``. Tokenizers count without special tokens, as budgets do.
    """
    if tokenizer is None or tokenizer == "words":
        return WordCounter()
    from transformers import AutoTokenizer

    if tokenizer.startswith("offline:"):
        from harness.backends.offline_models import default_folder, ensure_offline_model

        name = tokenizer.split(":", 1)[1]
        path = str(ensure_offline_model(name, default_folder(name, models_dir)))
    else:
        path = tokenizer
    return TokenCounter(AutoTokenizer.from_pretrained(path), name=tokenizer)
