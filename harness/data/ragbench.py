"""RAGBench (Friel et al., 2024) release files (``rungalileo/ragbench``, any subset) as Examples.

Fields used: ``id, question, documents [str], response, documents_sentences [[[key, sentence],
...] per document], all_relevant_sentence_keys [key]``; ``adherence_score``, ``relevance_score``,
``utilization_score`` and ``completeness_score`` are kept in ``metadata`` when present. Sentence
keys are ``f"{document_index}{letter(s)}"`` (``"0a"``, ``"1b"``, ``"12aa"``). Documents are built
from ``documents_sentences`` (the release's own sentence split), ids ``f"{id}::{document_index}"``;
gold documents are those holding any relevant sentence key. ``answers`` is ``(response,)``.
The release has rows whose ``all_relevant_sentence_keys`` is empty (no sentence of the documents
supports the response): with no gold document they have no recall to measure, so the loader skips
them (:func:`skip_reason`), counted with one warning.

Files may be JSON lines / a JSON list or Parquet (the Hugging Face release).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from harness.core.types import Document, Example
from harness.data.errors import DatasetFormatError
from harness.data.formats import DatasetFormat, has_keys, register_format
from harness.data.io import check_file, read_records
from harness.data.records import RecordContext, answers, doc_id_for, question_id

ID_FIELD = "id"
_KEY = re.compile(r"(\d+)[a-z]+")
_SCORES = ("adherence_score", "relevance_score", "utilization_score", "completeness_score")


def read_rows(path: str | Path) -> list[dict[str, Any]]:
    """The records of a RAGBench file: Parquet by suffix, else JSON lines or a JSON list."""
    path = Path(path)
    if path.suffix != ".parquet":
        return read_records(path)
    import pyarrow.parquet as pq

    check_file(path)
    try:
        rows = pq.read_table(path).to_pylist()
    except Exception as exc:  # pyarrow raises several types for a corrupt file
        raise DatasetFormatError(path, f"unreadable Parquet file: {exc}") from exc
    if not rows:
        raise DatasetFormatError(path, "file holds no records")
    return rows


def skip_reason(record: dict[str, Any]) -> str | None:
    """Why the loader skips a record by design, completing "records ..."; None to parse it.

    Only an empty key list is skipped; a missing, null or non-list field is parsed, so the parser
    reports it."""
    keys = record.get("all_relevant_sentence_keys")
    return "without relevant sentence keys" if isinstance(keys, list) and not keys else None


def parse_record(record: dict[str, Any], ctx: RecordContext, *, dataset: str, split: str) -> Example:
    qid = question_id(record, ID_FIELD, ctx)
    question = ctx.text(record, "question")
    response = ctx.text(record, "response")
    raw_documents = ctx.items(record, "documents_sentences", "no documents")

    documents = []
    for d_index, sentences in enumerate(raw_documents):
        field = f"documents_sentences[{d_index}]"
        if not isinstance(sentences, list) or not all(
            isinstance(pair, (list, tuple)) and len(pair) == 2 and all(isinstance(x, str) for x in pair)
            for pair in sentences
        ):
            raise ctx.error("expected a list of [key, sentence] pairs", field)
        text = tuple(s.strip() for _, s in sentences if s.strip())
        if not text:
            raise ctx.error(f"document {d_index} has no text", field)
        documents.append(Document(doc_id_for(qid, d_index), "", text))

    # load_examples skips these (skip_reason); a direct caller is told why there is no gold
    keys = ctx.items(record, "all_relevant_sentence_keys", "no relevant sentence keys: the record has no gold document")
    gold_positions = set()
    for key in keys:
        match = _KEY.fullmatch(key.strip()) if isinstance(key, str) else None
        if match is None:
            raise ctx.error(f"sentence key {key!r} is not '<document index><letters>'", "all_relevant_sentence_keys")
        position = int(match.group(1))
        if position >= len(documents):
            raise ctx.error(
                f"sentence key {key!r} names document {position}, but the record has {len(documents)}",
                "all_relevant_sentence_keys",
            )
        gold_positions.add(position)

    return Example(
        question_id=qid,
        question=question,
        answers=answers(response, (), ctx, "response"),
        gold_doc_ids=tuple(documents[i].doc_id for i in sorted(gold_positions)),
        documents=tuple(documents),
        hops=max(1, len(gold_positions)),
        split=split,
        dataset=dataset,
        metadata={
            "relevant_sentence_keys": tuple(k.strip() for k in keys),
            **{name: record[name] for name in _SCORES if record.get(name) is not None},
        },
    )


def is_parquet_file(path: Path) -> bool:
    """A Parquet path (by suffix) that is not a folder: RAGBench's Hugging Face release."""
    return path.suffix == ".parquet" and not path.is_dir()


FORMAT = register_format(
    DatasetFormat(
        layout="ragbench",
        looks="RAGBench: a Parquet file, or id, question, documents_sentences, all_relevant_sentence_keys, response",
        parse=parse_record,
        id_field=ID_FIELD,
        read=read_rows,
        skip_reason=skip_reason,
        detect_path=is_parquet_file,
        detect_record=has_keys("documents_sentences", "all_relevant_sentence_keys", "response"),
    )
)
