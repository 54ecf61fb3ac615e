"""What the long-document loaders (QASPER, QuALITY, NarrativeQA) share.

A question's ``documents`` are the chunks of one long text: its paragraphs split into sentences and
packed into chunks of at most ``chunk_tokens`` tokens (:mod:`harness.text.chunking`), so dense
retrieval and every tree share the same leaves. Chunk ids are ``<source id>::chunkNNN``. Questions
are subsampled like every dataset's (:func:`harness.data.sampling.subsample`). Each long-document format
is a registered :class:`harness.data.formats.DatasetFormat` read whole, as a SQuAD file or a BEIR folder
is: its reader is written as ``read(source, *, dataset, split, chunker, ...)`` and made the format's
``load`` by :func:`chunked`, which adds the chunking options every long-document dataset config has. The
public loaders the configs name (``load_qasper``, ...) are the common loader
(:func:`harness.data.loader.load_dataset`) with the layout set; :func:`long_document_format` registers a format.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from harness.core.types import Document, Example
from harness.data.formats import DatasetFormat, register_format
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


# The options every long-document format takes: how its texts are chunked (:class:`Chunker`).
CHUNK_OPTIONS = ("chunk_tokens", "tokenizer", "models_dir")


def chunked(read: Callable[..., list[Example]]) -> Callable[..., list[Example]]:
    """A long-document format's ``load`` (:class:`harness.data.formats.DatasetFormat`) from ``read(source,
    *, dataset, split, chunker, ...)``: it takes ``chunk_tokens``, ``tokenizer`` and ``models_dir`` in
    place of ``chunker`` (:data:`CHUNK_OPTIONS`)."""

    @functools.wraps(read)
    def load(
        source: str | Path,
        *,
        chunk_tokens: int = DEFAULT_CHUNK_TOKENS,
        tokenizer: str | None = None,
        models_dir: str | Path = ".cache/models",
        **options: Any,
    ) -> list[Example]:
        return read(source, chunker=Chunker(chunk_tokens, tokenizer, models_dir), **options)

    return load


def long_document_format(
    layout: str, looks: str, read: Callable[..., list[Example]], options: Sequence[str], **fields: Any
) -> DatasetFormat:
    """Register a long-document format: read whole by ``read`` (:func:`chunked`), named after its layout,
    taking the chunking options (:data:`CHUNK_OPTIONS`) and its own ``options``."""
    return register_format(
        DatasetFormat(
            layout=layout,
            looks=looks,
            load=chunked(read),
            options=(*CHUNK_OPTIONS, *options),
            **fields,
        )
    )
