"""Fixed-size chunks of a long document, counted in tokens, that never cut a sentence.

A sentence that would cross the chunk boundary moves whole to the next chunk (RAPTOR's rule), so a
chunk holds at most ``chunk_tokens`` tokens. A single sentence longer than a whole chunk is the one
exception that must be cut: it is split at word boundaries into pieces that each fit.

Token counting is explicit (:mod:`harness.text.tokens`): whitespace words by default, or a tokenizer's
exact counts. A chunk's token count is the sum of its sentences' counts: exact for words; with a
subword tokenizer, joining two sentences with a space can change the count by a token at the seam.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from harness.text.sentences import split_sentences
from harness.text.tokens import WordCounter

DEFAULT_CHUNK_TOKENS = 500  # the harness default
RAPTOR_CHUNK_TOKENS = 100  # RAPTOR's published configuration


@dataclass(frozen=True)
class Chunk:
    """Consecutive sentences of a document; ``sources`` are the indices of the units they came from and
    ``sentence_sources`` the unit of each sentence (a QASPER evidence paragraph is traced to its sentences)."""

    sentences: tuple[str, ...]
    sources: tuple[int, ...]
    tokens: int
    sentence_sources: tuple[int, ...] = ()

    @property
    def text(self) -> str:
        return " ".join(self.sentences)


def split_long_sentence(sentence: str, max_tokens: int, count: Callable[[str], int]) -> list[str]:
    """Cut a sentence longer than a chunk into word runs of at most ``max_tokens`` tokens each."""
    words = sentence.split()
    pieces: list[str] = []
    current: list[str] = []
    for word in words:
        trial = " ".join(current + [word])
        if current and count(trial) > max_tokens:
            pieces.append(" ".join(current))
            current = [word]
        else:
            current.append(word)
    if current:
        pieces.append(" ".join(current))
    # A single word longer than the cap (a URL, a formula) stays whole: it cannot be cut at a word.
    return pieces


def chunk_sentences(
    sentences: Sequence[str],
    chunk_tokens: int,
    count: Callable[[str], int],
    sources: Sequence[int] | None = None,
) -> list[Chunk]:
    """Pack sentences greedily, in order, into chunks of at most ``chunk_tokens`` tokens.

    ``sources[i]`` tags sentence ``i`` (its paragraph index, say); each chunk lists the distinct tags
    of its sentences in order, so evidence paragraphs can be traced to the chunks that hold them.
    """
    if isinstance(chunk_tokens, bool) or not isinstance(chunk_tokens, int) or chunk_tokens < 1:
        raise ValueError(f"chunk_tokens must be a positive integer, got {chunk_tokens!r}")
    if sources is not None and len(sources) != len(sentences):
        raise ValueError(f"{len(sources)} source tags for {len(sentences)} sentences")
    tags = list(sources) if sources is not None else [0] * len(sentences)

    units: list[tuple[str, int, int]] = []  # (text, tokens, source tag)
    for sentence, tag in zip(sentences, tags, strict=False):
        sentence = sentence.strip()
        if not sentence:
            continue
        n = count(sentence)
        if n > chunk_tokens:
            units.extend((piece, count(piece), tag) for piece in split_long_sentence(sentence, chunk_tokens, count))
        else:
            units.append((sentence, n, tag))

    chunks: list[Chunk] = []
    current: list[tuple[str, int, int]] = []
    used = 0
    for unit in units:
        if current and used + unit[1] > chunk_tokens:
            chunks.append(_make_chunk(current))
            current, used = [], 0
        current.append(unit)
        used += unit[1]
    if current:
        chunks.append(_make_chunk(current))
    return chunks


def _make_chunk(units: list[tuple[str, int, int]]) -> Chunk:
    sources = tuple(dict.fromkeys(tag for _, _, tag in units))
    return Chunk(
        sentences=tuple(u[0] for u in units),
        sources=sources,
        tokens=sum(u[1] for u in units),
        sentence_sources=tuple(u[2] for u in units),
    )


def chunk_paragraphs(
    paragraphs: Sequence[str],
    chunk_tokens: int = DEFAULT_CHUNK_TOKENS,
    count: Callable[[str], int] | None = None,
    split: Callable[[str], Sequence[str]] = split_sentences,
) -> list[Chunk]:
    """Chunk a document given as paragraphs; each chunk's ``sources`` are paragraph indices.

    Chunks run across paragraph boundaries (the document is one stream of sentences, as in RAPTOR).
    """
    count = count or WordCounter().count
    sentences: list[str] = []
    tags: list[int] = []
    for index, paragraph in enumerate(paragraphs):
        if not paragraph or not paragraph.strip():
            continue
        for sentence in split(paragraph):
            sentences.append(sentence)
            tags.append(index)
    return chunk_sentences(sentences, chunk_tokens, count, tags)
