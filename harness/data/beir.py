"""BEIR (Thakur et al., 2021) dataset folders as Examples, for open-setting retrieval.

A folder holds ``corpus.jsonl`` (``{_id, title, text}``), ``queries.jsonl`` (``{_id, text}``) and
``qrels/<split>.tsv`` (header ``query-id corpus-id score``). One Example per query that has qrels
in the split, in qrels order. The corpus is read once and the same tuple of Documents (ids: the
corpus ``_id``) is attached to every Example, so memory does not grow with the number of queries;
use it with ``retriever.setting=open``, which indexes the union of documents once. Gold documents
are the qrels with score > 0 (in corpus order); the graded judgements are kept as
``metadata["qrels"]`` ``{doc_id: score}``. BEIR is retrieval-only: ``answers`` is empty. Qrels
naming a document absent from the corpus are left out of the gold set and counted in
``metadata["missing_qrels"]`` (BEIR's evaluation ignores them as well). A query left with no gold
document (its relevant documents all absent from the corpus, or every judgement scored 0) has no
recall to measure: it is skipped, counted per reason with one warning (:class:`RecordChecks`).
"""

from __future__ import annotations

import csv
import io
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from harness.core.types import Document, Example
from harness.data.errors import DatasetFormatError, DatasetNotFoundError
from harness.data.formats import DatasetFormat, register_format
from harness.data.io import read_records, read_text
from harness.data.records import RecordContext, peek_id
from harness.data.validate import RecordChecks
from harness.text.sentences import split_sentences

_QRELS_HEADER = ("query-id", "corpus-id", "score")
# Why a judged query is skipped, completing "queries ...".
_MISSING_GOLD = "whose relevant documents are all missing from corpus.jsonl"
_NO_RELEVANT = "without a relevant judgement (score > 0)"


def is_beir_folder(path: str | Path) -> bool:
    path = Path(path)
    return path.is_dir() and (path / "corpus.jsonl").is_file() and (path / "queries.jsonl").is_file()


def read_corpus(path: Path) -> tuple[Document, ...]:
    documents = []
    checks = RecordChecks(path, unit="documents")
    for index, record in enumerate(read_records(path)):
        ctx = RecordContext(path, index, peek_id(record, "_id"))
        doc_id = str(ctx.get(record, "_id", (str, int))).strip()
        if not doc_id:
            raise ctx.error("empty id", "_id")
        checks.unique(doc_id, ctx, "_id", what="document id")
        text = ctx.get(record, "text", str)
        title = record.get("title") or ""
        if not isinstance(title, str):
            raise ctx.error(f"expected a string, got {type(title).__name__}", "title")
        # A few BEIR corpora hold title-only entries; the title then stands as the text.
        sentences = split_sentences(text) or split_sentences(title)
        if not sentences:
            raise ctx.error("document has neither text nor title", "text")
        documents.append(Document(doc_id, title.strip(), sentences))
    return tuple(documents)


def read_queries(path: Path) -> dict[str, str]:
    queries: dict[str, str] = {}
    checks = RecordChecks(path, unit="queries")
    for index, record in enumerate(read_records(path)):
        ctx = RecordContext(path, index, peek_id(record, "_id"))
        query_id = str(ctx.get(record, "_id", (str, int))).strip()
        checks.unique(query_id, ctx, "_id", what="query id")
        queries[query_id] = ctx.text(record, "text")
    return queries


def read_qrels(path: Path) -> dict[str, dict[str, int]]:
    """``{query_id: {doc_id: score}}`` in file order; the header row is required."""
    # Qrels rows hold no quoted newlines, so a bad byte's row is its line less the header.
    text = read_text(path, locate=lambda prefix: max(0, prefix.count("\n") - 1), what="qrels file")
    if not text.strip():
        raise DatasetFormatError(path, "file is empty")
    qrels: dict[str, dict[str, int]] = {}
    rows = csv.reader(io.StringIO(text, newline=""), delimiter="\t")
    header = next(rows, None)
    if header is None or tuple(h.strip() for h in header) != _QRELS_HEADER:
        expected = "\t".join(_QRELS_HEADER)
        raise DatasetFormatError(path, f"expected the header {expected!r}, got {header!r}", field="header")
    for index, row in enumerate(rows):
        if not row or not "".join(row).strip():
            continue
        query_id = row[0].strip() if row else None
        if len(row) != 3:
            raise DatasetFormatError(path, f"expected 3 tab-separated columns, got {len(row)}", index, query_id)
        try:
            score = int(row[2])
        except ValueError:
            raise DatasetFormatError(path, f"score {row[2]!r} is not an integer", index, query_id, "score") from None
        judged = qrels.setdefault(query_id, {})
        doc_id = row[1].strip()
        if doc_id in judged:
            # A second judgement of the same pair would silently replace the first.
            raise DatasetFormatError(
                path, f"document {doc_id!r} judged twice for this query", index, query_id, "corpus-id"
            )
        judged[doc_id] = score
    if not qrels:
        raise DatasetFormatError(path, "file holds no judgements")
    return qrels


def load_folder(path: str | Path, *, dataset: str, split: str = "test") -> list[Example]:
    """One Example per judged query of ``qrels/<split>.tsv``, all sharing the corpus."""
    path = Path(path)
    if not path.exists():
        raise DatasetNotFoundError(path, "BEIR folder not found")
    if not path.is_dir():
        raise DatasetFormatError(
            path, "expected a BEIR folder (corpus.jsonl, queries.jsonl, qrels/<split>.tsv), got a file"
        )
    qrels_path = path / "qrels" / f"{split}.tsv"
    qrels = read_qrels(qrels_path)
    queries = read_queries(path / "queries.jsonl")
    documents = read_corpus(path / "corpus.jsonl")
    order = {d.doc_id: i for i, d in enumerate(documents)}

    examples = []
    checks = RecordChecks(qrels_path, unit="queries")
    for index, (query_id, judged) in enumerate(qrels.items()):
        if query_id not in queries:
            raise DatasetFormatError(qrels_path, "query id not in queries.jsonl", index, query_id, "query-id")
        relevant = [doc for doc, score in judged.items() if score > 0]
        gold = sorted((doc for doc in relevant if doc in order), key=order.__getitem__)
        if not gold:
            checks.skip(_MISSING_GOLD if relevant else _NO_RELEVANT)
            continue
        examples.append(
            Example(
                question_id=query_id,
                question=queries[query_id],
                answers=(),
                gold_doc_ids=tuple(gold),
                documents=documents,
                hops=1,
                split=split,
                dataset=dataset,
                metadata={"qrels": dict(judged), "missing_qrels": sum(doc not in order for doc in judged)},
            )
        )
    checks.finish(len(qrels), len(examples))
    return examples


def _dataset_name(path: Path, options: Mapping[str, Any]) -> str:
    return path.name


FORMAT = register_format(
    DatasetFormat(
        layout="beir",
        looks="a BEIR folder: corpus.jsonl, queries.jsonl, qrels/",
        default_name=_dataset_name,
        load=load_folder,  # a folder of corpus, queries and judgements, not a list of per-question records
        default_split=lambda path: "test",
        detect_path=is_beir_folder,
    )
)
