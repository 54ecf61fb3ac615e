"""NarrativeQA (Kočiský et al., 2018) in its official repository layout, one Example per question.

    ROOT/qaps.csv                               document_id, set, question, answer1, answer2, ...
    ROOT/documents.csv                          document_id, set, kind, ..., story_start, story_end
    ROOT/third_party/wikipedia/summaries.csv    document_id, set, summary, summary_tokenized
    ROOT/tmp/<document_id>.content              full stories, as fetched by the official download script

``context="summaries"`` answers from the plot summaries, ``context="stories"`` from the full stories
(cut between ``story_start`` and ``story_end`` when both are found; HTML pages, as most movie
scripts are, are stripped to text). Either way the context is chunked like every long document
(:mod:`harness.text.chunking`) and becomes the question's ``documents``. ``answers`` are the two
reference answers; NarrativeQA marks no evidence, so ``gold_doc_ids`` is empty.
"""

from __future__ import annotations

import csv
import io
import re
import sys
from pathlib import Path
from typing import Any

from harness.core.types import Document, Example
from harness.data.errors import DatasetFormatError, DatasetNotFoundError
from harness.data.io import read_text
from harness.data.loader import load_dataset
from harness.data.longdoc import Chunker, long_document_format
from harness.data.records import RecordContext
from harness.data.validate import RecordChecks
from harness.text.html import html_paragraphs

SPLITS = ("train", "valid", "test")
CONTEXTS = ("summaries", "stories")

# Stories run to megabytes; the csv module's default field limit (128 KiB) is far too small.
csv.field_size_limit(min(sys.maxsize, 2**31 - 1))


def _csv_row_at(prefix: str) -> int | None:
    """Index of the data row (header excluded) that continues past ``prefix``."""
    try:
        rows = list(csv.reader(io.StringIO(prefix, newline="")))
    except csv.Error:  # the prefix ends inside a quoted field
        return None
    ends_a_row = not prefix or prefix.endswith(("\n", "\r"))
    return max(0, len(rows) - (1 if ends_a_row else 2))


def read_csv(path: Path, required: tuple[str, ...], unique: str | None = None) -> list[dict[str, str]]:
    """The rows of a CSV file with the ``required`` columns; ``unique`` names a column whose values
    must not repeat (a repeated document would silently replace the first)."""
    text = read_text(path, locate=_csv_row_at, what="NarrativeQA file")
    if not text.strip():
        raise DatasetFormatError(path, "file is empty")
    reader = csv.DictReader(io.StringIO(text, newline=""))
    missing = [f for f in required if f not in (reader.fieldnames or [])]
    if missing:
        raise DatasetFormatError(path, f"missing columns {missing}; header is {reader.fieldnames}", field=missing[0])
    rows = list(reader)
    for index, row in enumerate(rows):
        # DictReader pads a short row with None and files extra cells under None: a truncated or
        # shifted row must not be read as a row with blank answers.
        if None in row or any(value is None for value in row.values()):
            cells = sum(value is not None for key, value in row.items() if key is not None)
            cells += len(row.get(None) or ())
            short = next((key for key, value in row.items() if value is None), None)
            raise DatasetFormatError(
                path,
                f"row has {cells} cells, the header {len(reader.fieldnames)} (truncated or misquoted?)",
                index=index,
                field=short,
            )
    if unique is not None:
        checks = RecordChecks(path, unit="rows")
        for index, row in enumerate(rows):
            checks.unique(row[unique], RecordContext(path, index, row[unique]), unique, what=unique)
    return rows


def story_paragraphs(raw: str, start: str = "", end: str = "") -> list[str]:
    """A story's paragraphs: HTML stripped when it is a web page, cut to [start, end] when both markers
    are found (the official layout's ``story_start``/``story_end``), split at blank lines."""
    looks_html = bool(re.search(r"<\s*(html|body|pre|p|br)\b", raw[:5000], re.IGNORECASE))
    text = "\n\n".join(html_paragraphs(raw)) if looks_html else raw
    if start and end:
        i = text.find(start)
        j = text.rfind(end)
        if 0 <= i < j:
            text = text[i : j + len(end)]
    paragraphs = [" ".join(block.split()) for block in re.split(r"\n\s*\n", text)]
    return [p for p in paragraphs if p]


def read_narrativeqa(
    root: str | Path,
    *,
    dataset: str,
    split: str,
    chunker: Chunker,
    context: str = "summaries",
    stories_dir: str = "tmp",
    summaries_file: str = "third_party/wikipedia/summaries.csv",
) -> list[Example]:
    """NarrativeQA questions of ``split`` (train / valid / test) as Examples (see the module docstring):
    the format's reader."""
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
    if context not in CONTEXTS:
        raise ValueError(f"context must be one of {CONTEXTS}, got {context!r}")
    root = Path(root)
    if not root.exists():
        raise DatasetNotFoundError(root, "NarrativeQA folder not found")
    if not root.is_dir():
        raise DatasetFormatError(root, "expected the NarrativeQA folder (qaps.csv, documents.csv, ...), got a file")

    qaps_path = root / "qaps.csv"
    qaps = read_csv(qaps_path, ("document_id", "set", "question", "answer1", "answer2"))
    qaps = [(i, row) for i, row in enumerate(qaps) if row["set"] == split]
    # Every file is read and checked before the first chunk loads the tokenizer.

    if context == "summaries":
        path = root / summaries_file
        rows = read_csv(path, ("document_id", "summary"), unique="document_id")
        wanted = {row["document_id"] for _, row in qaps}
        for index, row in enumerate(rows):
            if row["document_id"] in wanted and not row["summary"].strip():
                raise DatasetFormatError(
                    path, "empty summary", index=index, record_id=row["document_id"], field="summary"
                )
        texts = {row["document_id"]: [" ".join(row["summary"].split())] for row in rows}
        kinds: dict[str, str] = {}
    else:
        documents_path = root / "documents.csv"
        rows = read_csv(documents_path, ("document_id", "kind", "story_start", "story_end"), unique="document_id")
        meta = {row["document_id"]: row for row in rows}
        kinds = {d: row["kind"] for d, row in meta.items()}
        texts = {}
        for doc_id in dict.fromkeys(row["document_id"] for _, row in qaps):
            story = root / stories_dir / f"{doc_id}.content"
            if not story.is_file():
                raise DatasetNotFoundError(story, f"story {doc_id!r} not found; run the official download script")
            row = meta.get(doc_id)
            if row is None:
                raise DatasetFormatError(
                    documents_path, f"no row for document {doc_id!r} named in qaps.csv", field="document_id"
                )
            raw = story.read_text(encoding="utf-8", errors="replace")
            texts[doc_id] = story_paragraphs(raw, row["story_start"], row["story_end"])

    chunked: dict[str, tuple[Document, ...]] = {}
    examples: list[Example] = []
    for index, row in qaps:
        doc_id = row["document_id"]
        question = row["question"].strip()
        answers = tuple(a.strip() for a in (row["answer1"], row["answer2"]) if a and a.strip())
        if not question:
            raise DatasetFormatError(qaps_path, "empty question", index=index, record_id=doc_id, field="question")
        if not answers:
            raise DatasetFormatError(qaps_path, "no reference answer", index=index, record_id=doc_id, field="answer1")
        if doc_id not in texts:
            raise DatasetFormatError(
                qaps_path,
                f"document {doc_id!r} has no {context[:-1]}",
                index=index,
                record_id=doc_id,
                field="document_id",
            )
        if doc_id not in chunked:
            chunked[doc_id] = chunker.documents(doc_id, texts[doc_id])
            if not chunked[doc_id]:
                raise DatasetFormatError(
                    qaps_path,
                    f"document {doc_id!r}: empty {context[:-1]}",
                    index=index,
                    record_id=doc_id,
                    field="document_id",
                )
        examples.append(
            Example(
                question_id=f"{doc_id}::q{index}",
                question=question,
                answers=answers,
                gold_doc_ids=(),
                documents=chunked[doc_id],
                hops=0,
                qtype=kinds.get(doc_id, ""),
                split=split,
                dataset=dataset,
                # answer_type: the answer class for the dynamic tree's annotation classifier; the answers
                # are free-form, written by annotators from a summary, not spans of the story.
                metadata={"document_id": doc_id, "context": context, "answer_type": "abstractive"},
            )
        )
    return examples


FORMAT = long_document_format(
    "narrativeqa",
    "NarrativeQA: the official repository folder (qaps.csv, documents.csv, third_party/wikipedia/)",
    read_narrativeqa,
    ("context", "stories_dir", "summaries_file"),
    default_split=lambda root: "test",
)


def load_narrativeqa(root: str | Path, **options: Any) -> list[Example]:
    """NarrativeQA questions as Examples (see the module docstring): the common loader
    (:func:`harness.data.loader.load_dataset`) reading the repository folder ``root`` as this format, with its
    options (``split``: train / valid / test, default test; ``context``, ``stories_dir``, ``summaries_file``) and
    the chunking options every long-document config has (``chunk_tokens``, ``tokenizer``, ``models_dir``),
    ``sample_size``, ``seed``.
    """
    return load_dataset(root, "narrativeqa", **options)
