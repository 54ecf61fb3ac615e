"""The official evidence metrics, measured on what reached the reader.

A system in these benchmarks predicts its evidence; here the prediction is the packed context itself:
the evidence a packer put in front of the reader. Each score follows its benchmark's script:

- HotpotQA supporting facts (``hotpot_evaluate_v1.py``, ``update_sp``): the (title, sentence index)
  pairs of the context's sentences against the record's ``supporting_facts``; EM is 1 when the sets are
  equal, precision/recall/F1 are 0 when a side is empty. 2WikiMultihopQA's ``evaluate_v1.1`` is the same
  with titles lower-cased. Joint EM/F1 combine them with the answer: joint precision = answer precision x
  sp precision, joint recall likewise, joint F1 their harmonic mean, joint EM = EM x sp EM (2Wiki's script
  also multiplies in its evidence-triple scores, which a reader does not produce: its joint here is
  HotpotQA's).
- MuSiQue support (``evaluate_v1.0.py``, ``metrics/support.py``): the question's paragraphs that reached the
  reader against its supporting ones, scored as HotpotQA's sp, except that an empty prediction against an
  empty gold set is EM 1 and F1 1. Computed for every question with gold documents (its paragraphs; for
  the long-document sets, its chunks).
- QASPER evidence F1 (``qasper_evaluator.py`` with ``--text_evidence_only``): the paper paragraphs that
  reached the reader against each annotator's evidence paragraphs (figure and table evidence, "FLOAT
  SELECTED", left out; an unanswerable annotation's evidence is empty), the maximum over annotators;
  1.0 when both are empty, 0.0 when they share nothing.

A sentence reaches the reader when a whole (uncut) snippet from its own document holds its whole text; a
paragraph when one of its sentences does. A budget-cut fragment (``Snippet.truncated``) credits nothing,
as in gold-document coverage, and a summary node (several source documents) credits no sentence: it is
not the sentence, however close its wording.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

from harness.core.types import Context, Document, Example, Snippet
from harness.metrics.context import contributing_source_ids
from harness.metrics.registry import (
    EVIDENCE_F1,
    JOINT_EM,
    JOINT_F1,
    SP_EM,
    SP_F1,
    SP_PRECISION,
    SP_RECALL,
    SUPPORT_EM,
    SUPPORT_F1,
)

# Example.metadata keys the loaders fill in.
SUPPORTING_FACTS = "supporting_facts"  # ((title, sentence index), ...) as the record gives them
SUPPORTING_FACT_TITLES = "supporting_fact_titles"  # "lowercase" where the official script lower-cases titles
# QASPER: each annotator's text evidence as paper paragraph indices (Document.sentence_paragraphs), and how
# many of its evidence texts match no paragraph (harness.data.qasper.evidence_as_paragraphs).
EVIDENCE_PARAGRAPHS = "evidence_paragraphs"
EVIDENCE_UNMATCHED = "evidence_unmatched"


def set_scores(predicted: Iterable, gold: Iterable, *, empty_is_perfect: bool = False) -> tuple[float, ...]:
    """(EM, precision, recall, F1) of a predicted set against a gold set, as HotpotQA's ``update_sp``;
    ``empty_is_perfect``: MuSiQue's rule that two empty sets score EM 1 and F1 1."""
    predicted, gold = set(predicted), set(gold)
    tp = len(predicted & gold)
    fp, fn = len(predicted) - tp, len(gold) - tp
    precision = tp / (tp + fp) if tp + fp > 0 else 0.0
    recall = tp / (tp + fn) if tp + fn > 0 else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall > 0 else 0.0
    em = 1.0 if fp + fn == 0 else 0.0
    if empty_is_perfect and not predicted and not gold:
        f1, em = 1.0, 1.0
    return em, precision, recall, f1


def snippet_sentences(snippet: Snippet, documents: Mapping[str, Document]) -> list[int]:
    """Indices of the sentences of the snippet's document that the snippet holds whole; none for a
    budget-cut fragment, a summary (several sources) or a text from outside the question's documents."""
    if snippet.truncated or len(snippet.source_ids) != 1 or snippet.source_ids[0] not in documents:
        return []
    sentences = [s.strip() for s in documents[snippet.source_ids[0]].sentences]
    text = snippet.text.strip()
    exact = [i for i, s in enumerate(sentences) if s and s == text]
    # A sentence snippet is its sentence; a window, a whole candidate or a word chunk holds several.
    return exact or [i for i, s in enumerate(sentences) if s and s in text]


def sentences_in_context(context: Context, example: Example) -> set[tuple[str, int]]:
    """(doc_id, sentence index in the Example's document) of every sentence that reached the reader."""
    documents = {doc.doc_id: doc for doc in example.documents}
    return {(snippet.source_ids[0], i) for snippet in context.snippets for i in snippet_sentences(snippet, documents)}


def _normalise_title(title: str, convention: str | None) -> str:
    return title.lower() if convention == "lowercase" else title


def supporting_fact_scores(context: Context, example: Example) -> dict[str, float]:
    """HotpotQA's sp EM, F1, precision and recall of the context; {} when the record has no sentence-level
    supporting facts."""
    facts = example.metadata.get(SUPPORTING_FACTS)
    if not facts:
        return {}
    convention = example.metadata.get(SUPPORTING_FACT_TITLES)
    titles = {doc.doc_id: doc.title for doc in example.documents}
    predicted = {(_normalise_title(titles[d], convention), i) for d, i in sentences_in_context(context, example)}
    gold = {(_normalise_title(title, convention), int(i)) for title, i in facts}
    em, precision, recall, f1 = set_scores(predicted, gold)
    return {SP_EM: em, SP_F1: f1, SP_PRECISION: precision, SP_RECALL: recall}


def joint_scores(
    answer_em: float, answer_precision: float, answer_recall: float, figures: dict[str, float]
) -> dict[str, float]:
    """HotpotQA's joint EM and F1 from the answer's EM, precision and recall and the row's sp figures;
    {} when the row has none."""
    if SP_EM not in figures or any(math.isnan(figures[k]) for k in (SP_EM, SP_PRECISION, SP_RECALL)):
        return {}
    precision = answer_precision * figures[SP_PRECISION]
    recall = answer_recall * figures[SP_RECALL]
    f1 = 2 * precision * recall / (precision + recall) if precision + recall > 0 else 0.0
    return {JOINT_EM: answer_em * figures[SP_EM], JOINT_F1: f1}


def support_scores(context: Context, example: Example) -> dict[str, float]:
    """MuSiQue's support EM and F1: the question's documents that contribute a snippet against its gold
    documents; {} without gold documents."""
    if not example.gold_doc_ids:
        return {}
    own = {doc.doc_id for doc in example.documents}
    predicted = contributing_source_ids(context) & own
    em, _, _, f1 = set_scores(predicted, example.gold_doc_ids, empty_is_perfect=True)
    return {SUPPORT_EM: em, SUPPORT_F1: f1}


def paragraph_f1(predicted: set, gold: Iterable) -> float:
    """QASPER's ``paragraph_f1_score``."""
    gold = set(gold)
    if not gold and not predicted:
        return 1.0
    same = len(gold & predicted)
    if same == 0:
        return 0.0
    precision, recall = same / len(predicted), same / len(gold)
    return 2 * precision * recall / (precision + recall)


def evidence_scores(context: Context, example: Example) -> dict[str, float]:
    """QASPER's evidence F1 of the context (the maximum over annotators); {} for other datasets."""
    evidence = example.metadata.get(EVIDENCE_PARAGRAPHS)
    if evidence is None:
        return {}
    unmatched = example.metadata.get(EVIDENCE_UNMATCHED) or (0,) * len(evidence)
    documents = {doc.doc_id: doc for doc in example.documents}
    predicted = {
        documents[d].sentence_paragraphs[i]
        for d, i in sentences_in_context(context, example)
        if documents[d].sentence_paragraphs
    }
    # An evidence text found in no paragraph cannot be predicted but counts against recall: a negative id.
    references = [
        set(found) | {-1 - k for k in range(missing)} for found, missing in zip(evidence, unmatched, strict=True)
    ]
    return {EVIDENCE_F1: max((paragraph_f1(predicted, ref) for ref in references), default=math.nan)}


def evidence_diagnostics(context: Context, example: Example) -> dict[str, float]:
    """Every official evidence metric that applies to the question, keyed by its row column."""
    return {
        **supporting_fact_scores(context, example),
        **support_scores(context, example),
        **evidence_scores(context, example),
    }
