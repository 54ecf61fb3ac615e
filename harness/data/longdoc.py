"""What the long-document loaders (QASPER, QuALITY, NarrativeQA) share.

A question's ``documents`` are the chunks of one long text: its paragraphs split into sentences and
packed into chunks of at most ``chunk_tokens`` tokens (:mod:`harness.text.chunking`), so dense
retrieval and every tree share the same leaves. Chunk ids are ``<source id>::chunkNNN``. Questions
are subsampled like every dataset's (:func:`harness.data.sampling.subsample`). A loader is written as
``read(source, ..., *, chunker, ...)`` and decorated with :func:`long_document_loader`, which adds the
parameters every long-document dataset config has.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from harness.core.types import Document, Example
from harness.data.sampling import check_sample_size, subsample
from harness.text.chunking import DEFAULT_CHUNK_TOKENS, Chunk, chunk_paragraphs
from harness.text.tokens import resolve_token_counter


@dataclass
class Chunker:
    """Cuts long texts into Documents of at most ``chunk_tokens`` tokens.

    ``tokenizer`` says how tokens are counted: ``None`` for whitespace words, ``offline:smollm2`` (the
    packaged reader's tokenizer, converted into ``models_dir`` on first use) or a tokenizer hub id or
    folder.
    """

    chunk_tokens: int = DEFAULT_CHUNK_TOKENS
    tokenizer: str | None = None
    models_dir: str | Path = ".cache/models"

    @cached_property
    def count(self) -> Callable[[str], int]:
        # Loaded at the first chunk, after the loader has read and checked its files: a malformed file
        # fails at once instead of after a tokenizer load.
        return resolve_token_counter(self.tokenizer, self.models_dir).count

    def chunks(
        self, source_id: str, paragraphs: Sequence[str], paragraph_titles: Sequence[str] | None = None
    ) -> list[tuple[Document, Chunk]]:
        """Each chunk of ``paragraphs`` as a Document beside its Chunk (the paragraphs it holds, and the
        paragraph of each of its sentences); a chunk's title is its first paragraph's (``paragraph_titles``),
        else empty."""
        chunks = chunk_paragraphs(paragraphs, self.chunk_tokens, self.count)
        return [
            (
                Document(
                    doc_id=f"{source_id}::chunk{i:03d}",
                    title=paragraph_titles[chunk.sources[0]] if paragraph_titles is not None else "",
                    sentences=chunk.sentences,
                    sentence_paragraphs=chunk.sentence_sources,
                ),
                chunk,
            )
            for i, chunk in enumerate(chunks)
        ]

    def documents(self, source_id: str, paragraphs: Sequence[str]) -> tuple[Document, ...]:
        """The chunks of ``paragraphs`` as untitled Documents (empty when the text is)."""
        return tuple(document for document, _ in self.chunks(source_id, paragraphs))


def long_document_loader(read: Callable[..., list[Example]]) -> Callable[..., list[Example]]:
    """The loader ``read`` becomes when it also takes ``chunk_tokens``, ``tokenizer`` and ``models_dir``
    (its :class:`Chunker`, passed to ``read`` as ``chunker``) and ``sample_size`` and ``seed`` (a
    :func:`subsample` of what it returns). A bad ``sample_size`` fails before any file is read."""

    def load(
        *args,
        chunk_tokens: int = DEFAULT_CHUNK_TOKENS,
        tokenizer: str | None = None,
        models_dir: str | Path = ".cache/models",
        sample_size: int | None = None,
        seed: int = 0,
        **kwargs,
    ) -> list[Example]:
        check_sample_size(sample_size)
        examples = read(*args, chunker=Chunker(chunk_tokens, tokenizer, models_dir), **kwargs)
        return subsample(examples, sample_size, seed)

    # help() and Hydra's error messages show the loader's whole parameter list, not *args/**kwargs.
    shared = [p for p in inspect.signature(load).parameters.values() if p.kind is p.KEYWORD_ONLY]
    own = inspect.signature(read)
    functools.update_wrapper(load, read)
    load.__signature__ = own.replace(parameters=[p for p in own.parameters.values() if p.name != "chunker"] + shared)
    return load
