"""QuALITY (Pang et al., 2022): multiple-choice questions over long articles, one Example per question.

Two JSON-lines layouts are read, recognised per line:

- the release (v0.9 - v1.0.1): ``article`` (HTML string) and ``questions``: a list of records with
  ``question``, ``options`` (4), ``gold_label`` (1-based), ``difficult`` (1 = hard) and a
  ``question_unique_id``; test-split questions carry no ``gold_label`` and are skipped;
- the pre-release example layout: ``article`` as a list of HTML lines and flat fields ``questionN``,
  ``questionNoptionM``, ``questionN_gold_label`` (1-based), ``questionN_annotator_answers`` (untimed)
  and ``questionN_annotator_speed_answers``. A question is hard when a majority of the timed (speed)
  annotators answered wrongly while a majority of the untimed ones answered right, the paper's rule
  behind the release's ``difficult`` flag.

The article's HTML becomes paragraphs (block tags and double line breaks end a paragraph), which are
chunked like every long document (:mod:`harness.text.chunking`). ``answers`` are the gold option's
text and its letter; ``metadata`` holds ``options``, ``gold_index`` (0-based), ``hard``, the bare
question and the article id. With ``options_in_question`` (default) the question text lists the
lettered options, so the reader can choose among them.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from harness.core.types import Document, Example
from harness.data.errors import DatasetFormatError
from harness.data.io import check_file, read_records
from harness.data.loader import load_dataset
from harness.data.longdoc import Chunker, long_document_format
from harness.data.records import RecordContext
from harness.data.validate import RecordChecks
from harness.text.html import html_paragraphs

LETTERS = "ABCDEFGHIJ"


def format_question(question: str, options: list[str]) -> str:
    lines = [question.strip()] + [f"({LETTERS[i]}) {opt.strip()}" for i, opt in enumerate(options)]
    return "\n".join(lines)


def _majority(values: list[bool]) -> bool:
    return sum(values) * 2 > len(values)


def _release_questions(record: dict[str, Any], fail) -> list[dict[str, Any]]:
    questions = record["questions"]
    if not isinstance(questions, list):
        raise fail("expected a list", "questions")
    out = []
    for i, q in enumerate(questions):
        if not isinstance(q, dict):
            raise fail(f"question {i} is not an object", "questions")
        options = q.get("options")
        if not isinstance(options, list) or len(options) < 2 or not all(isinstance(o, str) for o in options):
            raise fail(f"question {i}: expected a list of option strings", "questions.options")
        if not isinstance(q.get("question"), str):
            raise fail(f"question {i}: missing or not a string", f"questions[{i}].question")
        gold = q.get("gold_label")
        out.append(
            {
                "id": str(q.get("question_unique_id") or f"{record.get('set_unique_id', '')}_{i}"),
                "field": f"questions[{i}]",
                "question": q["question"],
                "options": options,
                "gold": gold,
                "hard": bool(q.get("difficult", 0)),
            }
        )
    return out


# Every pre-release question field: questionN, questionNoptionM, questionN_gold_label, ...
_PRERELEASE_FIELD = re.compile(r"question(\d+)(?:option\d+|_\w+)?")


def _prerelease_questions(record: dict[str, Any], fail) -> list[dict[str, Any]]:
    # Numbered from every question field, not only questionN, so a question whose text field is
    # missing is reported instead of silently left out.
    numbers = sorted({int(m.group(1)) for key in record for m in [_PRERELEASE_FIELD.fullmatch(key)] if m})
    base = str(record.get("unique_id") or record.get("article_id"))
    out = []
    for n in numbers:
        if f"question{n}" not in record:
            raise fail(f"question {n} has options or labels but no text", f"question{n}")
        if not isinstance(record[f"question{n}"], str):
            raise fail(f"question {n}: expected a string, got {type(record[f'question{n}']).__name__}", f"question{n}")
        options = []
        m = 1
        while f"question{n}option{m}" in record:
            options.append(record[f"question{n}option{m}"])
            m += 1
        if len(options) < 2 or not all(isinstance(o, str) for o in options):
            raise fail(f"question {n}: expected option strings question{n}option1..", f"question{n}option1")
        gold = record.get(f"question{n}_gold_label")
        timed = record.get(f"question{n}_annotator_speed_answers") or []
        untimed = record.get(f"question{n}_annotator_answers") or []
        hard = (
            bool(timed)
            and gold is not None
            and _majority([a != gold for a in timed])
            and (not untimed or _majority([a == gold for a in untimed]))
        )
        out.append(
            {
                "id": f"{base}_q{n}",
                "field": f"question{n}",
                "question": record[f"question{n}"],
                "options": options,
                "gold": gold,
                "hard": hard,
            }
        )
    return out


def read_quality(
    path: str | Path,
    *,
    dataset: str,
    split: str,
    chunker: Chunker,
    options_in_question: bool = True,
    hard_only: bool = False,
) -> list[Example]:
    """QuALITY questions as Examples (see the module docstring): the format's reader."""
    path = check_file(path, "QuALITY file")
    records = read_records(path)
    examples: list[Example] = []
    checks = RecordChecks(path, unit="questions")
    total = labelled = 0
    chunk_cache: dict[str, tuple[Document, ...]] = {}
    for index, record in enumerate(records):
        record_id = (
            str(record.get("set_unique_id") or record.get("unique_id") or record.get("article_id") or "") or None
        )

        def fail(message: str, field: str, index: int = index, record_id: str | None = record_id) -> DatasetFormatError:
            return DatasetFormatError(path, message, index, record_id, field)

        article = record.get("article")
        if isinstance(article, list) and all(isinstance(x, str) for x in article):
            article = "".join(article)
        if not isinstance(article, str) or not article.strip():
            raise fail("missing or empty article", "article")
        questions = _release_questions(record, fail) if "questions" in record else _prerelease_questions(record, fail)
        if not questions:
            raise fail("record holds no questions (neither 'questions' nor 'questionN' fields)", "questions")

        article_id = str(record.get("article_id") or record_id)
        if article not in chunk_cache:
            paragraphs = html_paragraphs(article)
            if not paragraphs:
                raise fail("article has no text after HTML stripping", "article")
            chunk_cache[article] = chunker.documents(article_id, paragraphs)
        documents = chunk_cache[article]

        for q in questions:
            total += 1
            if q["gold"] is None:
                checks.skip("without gold_label (a test split?)")
                continue
            gold = q["gold"]
            if isinstance(gold, bool) or not isinstance(gold, int) or not 1 <= gold <= len(q["options"]):
                raise fail(f"question {q['id']!r}: gold_label {gold!r} is not 1..{len(q['options'])}", "gold_label")
            if not q["question"].strip():
                raise fail(f"question {q['id']!r} is empty", "question")
            # A file may repeat a record verbatim (the shared example file does): the copy is a counted
            # skip; the same id with different content is an error.
            if not checks.unique(
                q["id"], RecordContext(path, index, record_id), q["field"], content={**q, "article": article}
            ):
                continue
            labelled += 1
            if hard_only and not q["hard"]:
                continue
            gold_index = gold - 1
            examples.append(
                Example(
                    question_id=q["id"],
                    question=format_question(q["question"], q["options"])
                    if options_in_question
                    else q["question"].strip(),
                    answers=(q["options"][gold_index].strip(), LETTERS[gold_index]),
                    gold_doc_ids=(),
                    documents=documents,
                    hops=0,
                    qtype="hard" if q["hard"] else "easy",
                    split=split,
                    dataset=dataset,
                    metadata={
                        "options": tuple(o.strip() for o in q["options"]),
                        "gold_index": gold_index,
                        "hard": q["hard"],
                        "bare_question": q["question"].strip(),
                        "article_id": article_id,
                        "title": str(record.get("title") or ""),
                        # The answer class for the dynamic tree's annotation classifier: an option is
                        # written by the question's author, not a span copied from the article.
                        "answer_type": "abstractive",
                    },
                )
            )
    checks.finish(total, labelled)
    if not examples:
        raise DatasetFormatError(path, "no hard questions (hard_only=true)")
    return examples


FORMAT = long_document_format(
    "quality",
    "QuALITY: JSON lines of an article with its questions (a 'questions' list or questionN fields)",
    read_quality,
    ("options_in_question", "hard_only"),
)


def load_quality(path: str | Path, **options: Any) -> list[Example]:
    """QuALITY questions as Examples (see the module docstring): the common loader
    (:func:`harness.data.loader.load_dataset`) reading ``path`` as this format, with its options
    (``options_in_question``, ``hard_only``) and the chunking options every long-document config has
    (``chunk_tokens``, ``tokenizer``, ``models_dir``), ``sample_size``, ``seed``, ``split`` (default: the one the
    file name states).
    """
    return load_dataset(path, "quality", **options)
