"""QASPER (Dasigi et al., 2021): questions over NLP papers, one Example per question.

Accepted files: the official release (one JSON object mapping paper id -> paper, ``full_text`` and
``qas`` as lists of records), a JSON list of papers, or papers as concatenated JSON objects / JSON
lines carrying their ``id`` (the Hugging Face export, whose ``full_text`` and ``qas`` are columnar:
a dict of parallel lists). Both record shapes are read.

Each question's ``documents`` are the chunks of its paper's full text (paragraphs split into
sentences and packed into ``chunk_tokens``-token chunks by :mod:`harness.text.chunking`, so dense
retrieval and every tree share the same leaves). ``answers`` hold every annotator's answer, in the
official evaluator's form: extractive spans joined with ", ", the free-form answer, "Yes"/"No", or
"Unanswerable"; ``metadata["answer_types"]`` gives each answer's type (extractive, abstractive,
yes_no, unanswerable) and ``qtype`` is the first annotator's. ``gold_doc_ids`` are the chunks that
hold an evidence paragraph of any annotator (figure/table evidence, "FLOAT SELECTED: ...", is not
in the text and is not matched).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from harness.core.types import Example
from harness.data.errors import DatasetFormatError
from harness.data.io import check_file, json_record_at, read_text, text_position
from harness.data.loader import load_dataset
from harness.data.longdoc import Chunker, long_document_format
from harness.data.records import RecordContext, _kind_name
from harness.data.validate import RecordChecks

ANSWER_TYPES = ("extractive", "abstractive", "yes_no", "unanswerable")


class _DuplicateKey(ValueError):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    # json keeps the last of repeated keys; in the official layout that would drop a whole paper.
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _DuplicateKey(key)
        out[key] = value
    return out


def read_json_objects(path: Path) -> list[dict[str, Any]]:
    """Every top-level JSON value of ``path`` (one, a list, or several concatenated), as records."""
    text = read_text(path, locate=lambda prefix: paper_at(path, prefix))
    decoder = json.JSONDecoder(object_pairs_hook=_unique_keys)
    values: list[Any] = []
    pos = 0
    while True:
        while pos < len(text) and text[pos].isspace():
            pos += 1
        if pos >= len(text):
            break
        try:
            value, pos = decoder.raw_decode(text, pos)
        except json.JSONDecodeError as exc:
            raise DatasetFormatError(
                path, f"invalid or truncated JSON at {text_position(text, exc.pos)}: {exc.msg}", index=len(values)
            ) from None
        except _DuplicateKey as exc:
            raise DatasetFormatError(
                path,
                f"key {exc.key!r} repeats in one JSON object (the later value would replace the earlier)",
                index=len(values),
                field=exc.key,
            ) from None
        values.append(value)
    if not values:
        raise DatasetFormatError(path, "file is empty")
    if len(values) == 1 and isinstance(values[0], list):
        values = values[0]
    elif len(values) == 1 and isinstance(values[0], dict) and "qas" not in values[0]:
        # The official layout: {paper_id: paper}.
        values = [{"id": pid, **paper} if isinstance(paper, dict) else paper for pid, paper in values[0].items()]
    for index, value in enumerate(values):
        if not isinstance(value, dict):
            raise DatasetFormatError(path, f"expected a JSON object (a paper), got {type(value).__name__}", index=index)
    return values


def paper_at(path: Path, prefix: str) -> int | None:
    """Index of the paper that continues past ``prefix`` (a file's beginning), in any accepted layout:
    a JSON list, concatenated objects, or the official ``{paper_id: paper}`` object (a member's index)."""
    decoder = json.JSONDecoder()
    pos, count = 0, 0
    while True:
        while pos < len(prefix) and prefix[pos].isspace():
            pos += 1
        if pos >= len(prefix):
            return count  # between values: the next one holds the bad byte
        try:
            _, pos = decoder.raw_decode(prefix, pos)
        except json.JSONDecodeError:
            break
        count += 1
    if count:
        return count
    if prefix[pos] == "[":
        return json_record_at(path, prefix[pos:])
    members, first_is_paper = _complete_members(decoder, prefix, pos)
    # A paper's own first member ("id", "title", ...) is not an object; the official layout's members are papers.
    return members if first_is_paper else 0


def _complete_members(decoder: json.JSONDecoder, text: str, pos: int) -> tuple[int, bool]:
    """How many members of the object opening at ``text[pos]`` end before ``text`` does, and whether
    the first of them holds an object."""
    members, first_is_object = 0, False
    pos += 1
    while True:
        pos = _skip(text, pos, " \t\n\r,")
        try:
            _, pos = decoder.raw_decode(text, pos)  # the key
            pos = _skip(text, pos, " \t\n\r")
            if not text.startswith(":", pos):
                return members, first_is_object
            value, pos = decoder.raw_decode(text, _skip(text, pos + 1, " \t\n\r"))
        except json.JSONDecodeError:
            return members, first_is_object
        if members == 0:
            first_is_object = isinstance(value, dict)
        members += 1


def _skip(text: str, pos: int, chars: str) -> int:
    while pos < len(text) and text[pos] in chars:
        pos += 1
    return pos


def _rows(value: Any, fields: tuple[str, ...]) -> list[dict[str, Any]]:
    """A list of records, whether given as records or as a dict of parallel lists (columnar)."""
    if isinstance(value, list):
        return value
    if isinstance(value, dict):
        lengths = {len(value.get(f) or []) for f in fields}
        n = max(lengths) if lengths else 0
        return [{k: (v[i] if isinstance(v, list) and i < len(v) else None) for k, v in value.items()} for i in range(n)]
    raise TypeError(type(value).__name__)


class _Paper:
    def __init__(self, path: Path, index: int, record: dict[str, Any]) -> None:
        self.path, self.index, self.record = path, index, record
        self.id = str(record.get("id", "")) or None

    def error(self, message: str, field: str) -> DatasetFormatError:
        return DatasetFormatError(self.path, message, self.index, self.id, field)

    def get(self, field: str, kind: type | tuple[type, ...]) -> Any:
        if field not in self.record or self.record[field] is None:
            raise self.error("missing field", field)
        value = self.record[field]
        if not isinstance(value, kind):
            raise self.error(f"expected {_kind_name(kind)}, got {type(value).__name__}", field)
        return value


def answer_text_and_type(answer: dict[str, Any]) -> tuple[str, str]:
    """The official evaluator's reference string and type for one annotation."""
    if answer.get("unanswerable"):
        return "Unanswerable", "unanswerable"
    spans = [s for s in (answer.get("extractive_spans") or []) if s and s.strip()]
    if spans:
        return ", ".join(spans), "extractive"
    if (answer.get("free_form_answer") or "").strip():
        return answer["free_form_answer"].strip(), "abstractive"
    if answer.get("yes_no") is not None:
        return ("Yes" if answer["yes_no"] else "No"), "yes_no"
    raise ValueError("annotation has no answer (not unanswerable, no spans, no free-form answer, no yes/no)")


def paper_examples(
    paper: _Paper,
    chunker: Chunker,
    dataset: str,
    split: str,
    include_abstract: bool,
) -> list[Example]:
    record = paper.record
    pid = paper.get("id", str)
    title = str(record.get("title") or "")
    try:
        sections = _rows(paper.get("full_text", (list, dict)), ("section_name", "paragraphs"))
    except TypeError as exc:
        raise paper.error(f"unreadable sections ({exc})", "full_text") from exc

    paragraphs: list[str] = []
    paragraph_section: list[str] = []
    if include_abstract and (record.get("abstract") or "").strip():
        paragraphs.append(record["abstract"].strip())
        paragraph_section.append("Abstract")
    for s_index, section in enumerate(sections):
        if not isinstance(section, dict) or not isinstance(section.get("paragraphs") or [], list):
            raise paper.error(f"section {s_index} has no paragraph list", "full_text")
        name = section.get("section_name") or ""
        for paragraph in section.get("paragraphs") or []:
            if isinstance(paragraph, str) and paragraph.strip():
                paragraphs.append(paragraph.strip())
                paragraph_section.append(name)
    if not paragraphs:
        raise paper.error("paper has no full-text paragraphs", "full_text")

    chunks = chunker.chunks(pid, paragraphs, paragraph_section)
    documents = tuple(doc for doc, _ in chunks)
    chunks_of_paragraph: dict[str, list[str]] = {}
    for doc, chunk in chunks:
        for p in chunk.sources:
            chunks_of_paragraph.setdefault(paragraphs[p], []).append(doc.doc_id)
    paragraph_index: dict[str, int] = {}
    for index, paragraph in enumerate(paragraphs):
        paragraph_index.setdefault(paragraph, index)

    try:
        questions = _rows(paper.get("qas", (list, dict)), ("question", "question_id", "answers"))
    except TypeError as exc:
        raise paper.error(f"unreadable questions ({exc})", "qas") from exc
    examples = []
    for q_index, qa in enumerate(questions):
        qid = qa.get("question_id")
        question = (qa.get("question") or "").strip()
        if not qid or not question:
            raise paper.error(f"question {q_index} lacks its question or question_id", "qas")
        try:
            annotations = _rows(qa.get("answers") or [], ("answer", "annotation_id"))
        except TypeError as exc:
            raise paper.error(f"question {qid!r}: unreadable answers ({exc})", "qas.answers") from exc
        answers, types, evidence = [], [], []
        for a_index, annotation in enumerate(annotations):
            answer = annotation.get("answer") if isinstance(annotation, dict) else None
            if not isinstance(answer, dict):
                raise paper.error(f"question {qid!r}: annotation {a_index} has no answer record", "qas.answers")
            try:
                text, kind = answer_text_and_type(answer)
            except ValueError as exc:
                raise paper.error(f"question {qid!r}: annotation {a_index}: {exc}", "qas.answers") from exc
            answers.append(text)
            types.append(kind)
            evidence.append([e for e in (answer.get("evidence") or []) if isinstance(e, str)])
        if not answers:
            raise paper.error(f"question {qid!r} has no answers", "qas.answers")
        gold = tuple(dict.fromkeys(d for ev in evidence for e in ev for d in chunks_of_paragraph.get(e.strip(), [])))
        evidence_paragraphs, evidence_unmatched = evidence_as_paragraphs(evidence, types, paragraph_index)
        examples.append(
            Example(
                question_id=str(qid),
                question=question,
                answers=tuple(answers),
                gold_doc_ids=gold,
                documents=documents,
                hops=len(gold),
                qtype=types[0],
                split=split,
                dataset=dataset,
                metadata={
                    "paper_id": pid,
                    "paper_title": title,
                    "answer_types": tuple(types),
                    "evidence": tuple(tuple(ev) for ev in evidence),
                    "evidence_paragraphs": evidence_paragraphs,
                    "evidence_unmatched": evidence_unmatched,
                    "chunk_tokens": chunker.chunk_tokens,
                },
            )
        )
    return examples


def evidence_as_paragraphs(
    evidence: list[list[str]], types: list[str], paragraph_index: dict[str, int]
) -> tuple[tuple[tuple[int, ...], ...], tuple[int, ...]]:
    """Each annotator's evidence as the official evaluator reads it with ``--text_evidence_only`` (figure and
    table evidence, "FLOAT SELECTED", left out; none for an unanswerable answer), given as paper paragraph
    indices (the chunks' ``Document.sentence_paragraphs``), with the count of evidence texts found in no
    paragraph (they stay in the gold set: the evaluator counts them)."""
    matched, unmatched = [], []
    for texts, kind in zip(evidence, types, strict=True):
        kept = [] if kind == "unanswerable" else [e.strip() for e in texts if "FLOAT SELECTED" not in e]
        found = tuple(dict.fromkeys(paragraph_index[e] for e in kept if e in paragraph_index))
        matched.append(found)
        unmatched.append(len({e for e in kept if e not in paragraph_index}))
    return tuple(matched), tuple(unmatched)


def read_qasper(
    path: str | Path,
    *,
    dataset: str,
    split: str,
    chunker: Chunker,
    include_abstract: bool = False,
    answer_types: list[str] | tuple[str, ...] | None = None,
) -> list[Example]:
    """QASPER questions as Examples (see the module docstring): the format's reader."""
    path = check_file(path, "QASPER file")
    if answer_types is not None:
        unknown = [t for t in answer_types if t not in ANSWER_TYPES]
        if unknown:
            raise ValueError(f"unknown answer_types {unknown}; choose from {ANSWER_TYPES}")
    examples: list[Example] = []
    checks = RecordChecks(path, unit="papers")
    questions = RecordChecks(path, unit="questions")
    for index, record in enumerate(read_json_objects(path)):
        paper = _Paper(path, index, record)
        ctx = RecordContext(path, index, paper.id)
        checks.unique(paper.get("id", str), ctx, "id", what="paper id")
        for example in paper_examples(paper, chunker, dataset, split, include_abstract):
            questions.unique(example.question_id, ctx, "qas", where=f"record {index} (id {paper.id!r})")
            if answer_types is None or example.qtype in answer_types:
                examples.append(example)
    return examples


FORMAT = long_document_format(
    "qasper",
    "QASPER: papers with full_text and qas (one JSON object by paper id, a JSON list or JSON lines)",
    read_qasper,
    ("include_abstract", "answer_types"),
)


def load_qasper(path: str | Path, **options: Any) -> list[Example]:
    """QASPER questions as Examples (see the module docstring): the common loader
    (:func:`harness.data.loader.load_dataset`) reading ``path`` as this format, with its options (``include_abstract``,
    ``answer_types``: keep only questions whose first annotator's answer has one of these types) and the chunking
    options every long-document config has (``chunk_tokens``, ``tokenizer``, ``models_dir``), ``sample_size``,
    ``seed``, ``split`` (default: the one the file name states).
    """
    return load_dataset(path, "qasper", **options)
