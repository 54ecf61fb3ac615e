"""ExpertQA (Malaviya et al., 2024) records as Examples: expert questions with long cited answers.

Fields: ``question, annotator_id, answers {system: {answer_string, revised_answer_string, claims
[{claim_string, evidence [...], support, ...}], attribution [...]}}, metadata {question_type,
field, specific_field}``. Records carry no id: the question id is the record's position in the
file (stable for a given file).

``attribution`` lists only ``"[n] URL"`` strings; the page text a system drew on is in the claims'
``evidence`` entries, ``"[n] URL\\n\\ntext"``. Each distinct evidence text is one Document (title:
its URL; text split into sentences), shared by every claim that cites it. Entries that are a bare
URL (Bing Chat answers, for one) carry no text and make no document; a record whose evidence is
all bare URLs (or that cites no evidence at all) has nothing to retrieve and is skipped by the
loader, as are a record without any system answer and one whose answers cite (by ``[n]``) no evidence
with text, so it has no gold document (:func:`skip_reason`), with one counted warning per reason. A
record repeating an earlier one's question and systems is a DatasetFormatError (it would be scored
twice). Gold documents are those the answer string cites by ``[n]``.
Answers are each system's ``answer_string`` then its expert-revised ``revised_answer_string``.
``qtype`` is ``metadata.field`` (Healthcare / Medicine, Engineering and Technology, ...).
"""

from __future__ import annotations

import re
from typing import Any

from harness.core.types import Document, Example
from harness.data.errors import DatasetFormatError
from harness.data.formats import DatasetFormat, Identity, register_format
from harness.data.records import RecordContext, answers, doc_id_for
from harness.text.sentences import split_sentences

ID_FIELD = None  # records carry no id; the position in the file stands in
_EVIDENCE = re.compile(r"\s*\[(\d+)\]\s*(\S+)(?:\s*\n\s*\n(.*))?\Z", re.DOTALL)
_CITATION = re.compile(r"\[(\d+)\]")


def skip_reason(record: dict[str, Any]) -> str | None:
    """Why the loader skips a record by design, completing "records ..."; None to parse it.

    Skipped: records with no system answer at all (``answers: {}``), records whose cited
    evidence is all bare ``[n] URL`` strings (nothing to retrieve or read) and records whose answers
    cite no evidence with text (no gold document). Anything malformed is parsed, so the parser
    reports it.
    """
    systems = record.get("answers")
    if isinstance(systems, dict) and not systems:
        return "without any system answer"
    if has_evidence_text(record):
        return None if cites_evidence_text(record) else "whose answers cite no evidence with text"
    bare = any(
        isinstance(claim, dict) and claim.get("evidence") for system in systems.values() for claim in system["claims"]
    )
    return "whose evidence is bare URLs only" if bare else "without any evidence"


def has_evidence_text(record: dict[str, Any]) -> bool:
    """False for records whose cited evidence is all bare ``[n] URL`` strings (nothing to retrieve
    or read). Anything else, malformed entries included, is True, so the parser reports it."""
    systems = record.get("answers")
    if not isinstance(systems, dict) or not systems:
        return True
    for system in systems.values():
        claims = system.get("claims") if isinstance(system, dict) else None
        if not isinstance(claims, list):
            return True
        for claim in claims:
            evidence = claim.get("evidence") if isinstance(claim, dict) else None
            if not isinstance(evidence, list):
                return True
            for entry in evidence:
                match = _EVIDENCE.match(entry) if isinstance(entry, str) else None
                if match is None or (match.group(3) or "").strip():
                    return True
    return False


def cites_evidence_text(record: dict[str, Any]) -> bool:
    """False for records where no system's ``answer_string`` cites, by ``[n]``, an evidence entry
    with text: they have no gold document (recall is undefined). Anything malformed is True, so the
    parser reports it."""
    systems = record.get("answers")
    if not isinstance(systems, dict):
        return True
    for system in systems.values():
        answer = system.get("answer_string") if isinstance(system, dict) else None
        claims = system.get("claims") if isinstance(system, dict) else None
        if not isinstance(answer, str) or not answer.strip() or not isinstance(claims, list):
            return True
        cited = set(_CITATION.findall(answer))
        for claim in claims:
            evidence = claim.get("evidence") if isinstance(claim, dict) else None
            for entry in evidence if isinstance(evidence, list) else ():
                match = _EVIDENCE.match(entry) if isinstance(entry, str) else None
                if match is None or (match.group(1) in cited and (match.group(3) or "").strip()):
                    return True
    return False


def parse_record(record: dict[str, Any], ctx: RecordContext, *, dataset: str, split: str) -> Example:
    qid = str(ctx.index)
    question = ctx.text(record, "question")
    systems = ctx.get(record, "answers", dict)
    if not systems:
        raise ctx.error("no system answers", "answers")

    documents: list[Document] = []
    by_text: dict[tuple[str, str], str] = {}  # (url, text) -> doc id
    gold: set[str] = set()
    answer_texts: list[str] = []
    bare_urls = 0
    for name, system in systems.items():
        field = f"answers.{name}"
        if not isinstance(system, dict):
            raise ctx.error(f"expected an object, got {type(system).__name__}", field)
        try:
            answer = ctx.text(system, "answer_string")
        except DatasetFormatError as exc:
            # The field is named by its path from the record: every system has an answer_string.
            raise ctx.error(exc.message, f"{field}.answer_string") from None
        answer_texts.append(answer)
        revised = system.get("revised_answer_string")
        if isinstance(revised, str) and revised.strip():
            answer_texts.append(revised.strip())
        cited = set(_CITATION.findall(answer))
        claims = system.get("claims") or []
        if not isinstance(claims, list):
            raise ctx.error(f"expected a list, got {type(claims).__name__}", f"{field}.claims")
        for c_index, claim in enumerate(claims):
            evidence = claim.get("evidence") if isinstance(claim, dict) else None
            efield = f"{field}.claims[{c_index}].evidence"
            if not isinstance(evidence, list):
                raise ctx.error("expected a list of evidence strings", efield)
            for e_index, entry in enumerate(evidence):
                match = _EVIDENCE.match(entry) if isinstance(entry, str) else None
                if match is None:
                    raise ctx.error(f"entry {e_index} is not an '[n] URL' evidence string", efield)
                number, url, text = match.group(1), match.group(2), (match.group(3) or "").strip()
                if not text:
                    bare_urls += 1
                    continue
                key = (url, text)
                if key not in by_text:
                    by_text[key] = doc_id_for(qid, len(documents))
                    documents.append(Document(by_text[key], url, split_sentences(text)))
                if number in cited:
                    gold.add(by_text[key])
    if not documents:
        raise ctx.error("no evidence with text (only bare URLs)", "answers")

    meta = record.get("metadata") if isinstance(record.get("metadata"), dict) else {}
    return Example(
        question_id=qid,
        question=question,
        answers=answers(answer_texts[0], answer_texts[1:], ctx, "answers"),
        gold_doc_ids=tuple(d.doc_id for d in documents if d.doc_id in gold),
        documents=tuple(documents),
        hops=max(1, len(gold)),
        qtype=str(meta.get("field", "")),
        split=split,
        dataset=dataset,
        metadata={
            "systems": tuple(systems),
            "question_type": meta.get("question_type", ""),
            "specific_field": meta.get("specific_field", ""),
            "bare_url_evidence": bare_urls,
        },
    )


def is_expertqa_record(record: dict[str, Any]) -> bool:
    """A question with answers keyed by system (DPR records, tried first, hold an answer list)."""
    return {"question", "answers"} <= record.keys() and isinstance(record.get("answers"), dict)


FORMAT = register_format(
    DatasetFormat(
        layout="expertqa",
        looks="ExpertQA: question, answers {system: ...}",
        parse=parse_record,
        id_field=ID_FIELD,
        skip_reason=skip_reason,
        # Records carry no ids: what makes two records the same question is their question and systems.
        identity=Identity(
            lambda e: (e.question, e.metadata["systems"]), "record (same question and systems)", "question"
        ),
        detect_record=is_expertqa_record,
    )
)
