"""Question analysis for the dynamic tree: question class, table of contents, sub-questions.

Each step is one LM prompt whose output is parsed strictly; when the output cannot be parsed the
step falls back to a rule (question class) or to the question itself (sub-questions), and says so in
the returned ``source`` so results can separate LM decisions from fallbacks.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass

from harness.core.protocols import ChatLM
from harness.core.types import Example
from harness.tree.classify_prompts import ZERO_SHOT, classify_prompt

QUESTION_CLASSES = ("extractive", "abstractive", "yes_no", "unanswerable")

CLASSIFY_PROMPT = ZERO_SHOT  # the classification prompt by default (classify_prompts.py has the others)

TOC_PROMPT = (
    "Document:\n"
    "{document}\n"
    "\n"
    "Write a table of contents for the document above: one line per section, each a short title saying what the"
    " section covers. Reply with the table of contents only."
)

DECOMPOSE_PROMPT = (
    "Table of contents of a document:\n"
    "{toc}\n"
    "\n"
    "Question: {question}\n"
    "\n"
    "Break the question into at most {max_subquestions} simpler sub-questions, each answerable from one part of"
    " the document listed in the table of contents. Write one sub-question per line and nothing else."
)

# Label spellings an LM may use, mapped to the canonical class.
_LABEL_PATTERNS = {
    "yes_no": re.compile(r"\byes\s*(?:/|-|_|or|\s)\s*no\b|\bboolean\b|\bbinary\b", re.IGNORECASE),
    "unanswerable": re.compile(r"\bunanswerable\b|\bnot answerable\b|\bcannot be answered\b", re.IGNORECASE),
    "abstractive": re.compile(r"\babstractive\b", re.IGNORECASE),
    "extractive": re.compile(r"\bextractive\b", re.IGNORECASE),
}

_AUXILIARIES = frozenset(
    [
        "is",
        "are",
        "was",
        "were",
        "am",
        "do",
        "does",
        "did",
        "can",
        "could",
        "will",
        "would",
        "should",
        "shall",
        "has",
        "have",
        "had",
        "may",
        "might",
        "must",
    ]
)
_QUANTITY_AFTER_HOW = frozenset(
    ["many", "much", "big", "large", "long", "often", "old", "far", "few", "small", "high", "low", "fast", "well"]
)
_ABSTRACTIVE_STARTS = ("why", "explain", "describe", "compare", "summarize", "summarise", "discuss", "in what way")
_ABSTRACTIVE_NOUNS = re.compile(
    r"^what (?:is|are|was|were) (?:the )?(?:main )?(?:effect|effects|impact|difference|differences|relationship|role|"
    r"reason|reasons|advantage|advantages|benefit|benefits|limitation|limitations|motivation|intuition|idea|"
    r"contribution|contributions|results?|findings?|conclusions?|implications?|challenges?)\b",
    re.IGNORECASE,
)


def parse_question_class(output: str) -> str | None:
    """The single class the output names, or None (unparsed) when it names none or several: an output
    that echoes the option list ("Extractive, abstractive, yes/...") is unparsed, never its first word."""
    found = {label for label, pattern in _LABEL_PATTERNS.items() if pattern.search(output or "")}
    return found.pop() if len(found) == 1 else None


def rule_question_class(question: str) -> str:
    """A surface-form guess: auxiliary-verb openings are yes/no; why/how (not how many/much/...),
    explain/describe/compare and "what is the effect/role/..." are abstractive; the rest extractive.
    Rules cannot recognise an unanswerable question."""
    words = re.findall(r"[a-z']+", question.lower())
    if not words:
        return "extractive"
    text = " ".join(words)
    if words[0] in _AUXILIARIES:
        return "yes_no"
    if words[0] == "how":
        return "extractive" if len(words) > 1 and words[1] in _QUANTITY_AFTER_HOW else "abstractive"
    if text.startswith(_ABSTRACTIVE_STARTS) or _ABSTRACTIVE_NOUNS.match(text):
        return "abstractive"
    return "extractive"


_ANNOTATION_ALIASES = {
    "extractive": "extractive",
    "abstractive": "abstractive",
    "yes_no": "yes_no",
    "yes/no": "yes_no",
    "boolean": "yes_no",
    "unanswerable": "unanswerable",
    "none": "unanswerable",
}

# The annotated class of a question that has none (its dataset annotates no answer type, or the record
# carries none): counted as such, never guessed.
UNANNOTATED = "unannotated"

# ``classifier`` values; ``gold`` is an older name of ``annotation``.
CLASSIFIERS = ("lm", "rules", "annotation")
_CLASSIFIER_ALIASES = {"gold": "annotation"}


def classifier_mode(mode: str) -> str:
    """The canonical classifier name (``gold`` reads as ``annotation``); ValueError for an unknown one."""
    canonical = _CLASSIFIER_ALIASES.get(mode, mode)
    if canonical not in CLASSIFIERS:
        raise ValueError(f"classifier must be one of {CLASSIFIERS}, got {mode!r}")
    return canonical


def annotation_class(answer_type: str) -> str | None:
    """The class an answer-type label names (QASPER: extractive/abstractive/yes_no/unanswerable), or None."""
    return _ANNOTATION_ALIASES.get((answer_type or "").strip().lower())


@dataclass(frozen=True)
class Annotation:
    """A question's annotated class and the share of its annotators who gave it."""

    label: str  # a class of QUESTION_CLASSES, or UNANNOTATED
    agreement: float = math.nan  # annotators giving ``label`` / annotators with a type
    annotators: int = 0


def annotated_question_class(example: Example) -> Annotation:
    """The question's annotated class, from what its loader recorded.

    QASPER (``metadata["answer_types"]``, one type per annotator): the majority type; a tie goes to the
    tied type named first (so a question with one annotator, or two who disagree, takes the first
    annotator's type, which is also its ``qtype``). Datasets without per-answer types carry one
    ``metadata["answer_type"]`` set by their loader (QuALITY, NarrativeQA: abstractive, a mapping of this
    harness, see their loaders). Otherwise ``qtype`` when it names a class. A question with none of these,
    or whose types name no class, is UNANNOTATED."""
    metadata = example.metadata or {}
    types = metadata.get("answer_types") or ()
    labels = [label for label in (annotation_class(t) for t in types if isinstance(t, str)) if label is not None]
    if not labels:
        single = metadata.get("answer_type")
        single = (annotation_class(single) if isinstance(single, str) else None) or annotation_class(example.qtype)
        labels = [single] if single is not None else []
    if not labels:
        return Annotation(UNANNOTATED)
    label, count = Counter(labels).most_common(1)[0]  # equal counts keep first-seen order
    return Annotation(label, count / len(labels), len(labels))


@dataclass(frozen=True)
class Classification:
    label: str  # a class of QUESTION_CLASSES, or UNANNOTATED (classifier=annotation without an annotation)
    source: str  # lm | rules | annotation
    raw: str = ""
    lm_parsed: bool | None = None  # whether the LM's output named one class; None when no LM generated
    decided_by: str = ""  # likelihood | generation | rules | annotation: what chose the label


# How the LM classifier decides: ``likelihood`` scores each class's name as the reply to the classification
# prompt and takes the most likely (so it decides every question; a small LM rarely writes a parseable label),
# ``generation`` parses the LM's free reply (rules when it names no class or several).
CLASSIFY_BY = ("likelihood", "generation")
# A likelihood is the sum of the reply's token log-probabilities (lm-evaluation-harness's ``acc``), their
# mean per token (a longer class name is not penalised for its length), or the sum less the sum the same reply
# gets for a content-free question (``calibrated``: contextual calibration, Zhao et al., 2021, "Calibrate
# Before Use"), which removes the LM's prior for a class name whatever the question.
CLASSIFY_SCORES = ("sum", "per_token", "calibrated")
CONTENT_FREE_QUESTION = "N/A"
# Each class as the prompt asks the LM to write it.
CLASS_REPLIES = {
    "extractive": "extractive",
    "abstractive": "abstractive",
    "yes_no": "yes/no",
    "unanswerable": "unanswerable",
}


def class_by_likelihood(
    question: str, lm, score: str = "sum", prompt: str = "zero_shot"
) -> tuple[str, dict[str, float]]:
    """The class whose reply the LM finds most likely after the classification prompt named ``prompt``, and
    every class's score (ties go to the class named first in QUESTION_CLASSES)."""
    if score not in CLASSIFY_SCORES:
        raise ValueError(f"classify_score must be one of {CLASSIFY_SCORES}, got {score!r}")
    scorer = getattr(lm, "continuation_logprobs", None)
    if scorer is None:
        raise ValueError(
            f"the classifier's LM ({getattr(lm, 'name', type(lm).__name__)}) cannot score a reply: give the tree a "
            "transformers LM for classification (tree.classifier_lm, e.g. /lm@tree.classifier_lm=local_smollm2) "
            "or classify by generation (tree.classify_by=generation)"
        )
    template = classify_prompt(prompt)
    replies = [CLASS_REPLIES[c] for c in QUESTION_CLASSES]
    logprobs = scorer(template.format(question=question.strip()), replies)
    prior = scorer(template.format(question=CONTENT_FREE_QUESTION), replies) if score == "calibrated" else None
    scores = likelihood_scores(logprobs, score, prior)
    return max(QUESTION_CLASSES, key=lambda c: scores[c]), scores


def likelihood_scores(
    logprobs: list[list[float]], score: str, prior: list[list[float]] | None = None
) -> dict[str, float]:
    """Each class's score from its reply's token log-probabilities (in QUESTION_CLASSES order): their sum, their
    mean (``per_token``), or their sum less the sum the content-free question's ``prior`` gives (``calibrated``)."""
    if score == "per_token":
        return {c: sum(lp) / len(lp) for c, lp in zip(QUESTION_CLASSES, logprobs, strict=True)}
    scores = {c: sum(lp) for c, lp in zip(QUESTION_CLASSES, logprobs, strict=True)}
    if score == "calibrated":
        if prior is None:
            raise ValueError("a calibrated score needs the content-free question's log-probabilities")
        scores = {c: scores[c] - sum(lp) for c, lp in zip(QUESTION_CLASSES, prior, strict=True)}
    return scores


def classify_question(
    question: str,
    lm: ChatLM | None,
    mode: str = "lm",
    annotated: str | None = None,
    max_new_tokens: int = 8,
    by: str = "generation",
    score: str = "sum",
    prompt: str = "zero_shot",
) -> Classification:
    """The question's class by ``mode``: ``lm`` (decided ``by`` likelihood, or by generation with rules
    when the output is unparsed: it names no class or several), ``rules``, or ``annotation`` (the
    annotated class ``annotated``, an oracle; a question without one is UNANNOTATED, so it gets no tree,
    never a guess). ``gold`` is read as ``annotation``. ``prompt``: the classification prompt's name
    (:data:`harness.tree.classify_prompts.CLASSIFY_PROMPTS`)."""
    mode = classifier_mode(mode)
    if mode == "annotation":
        label = annotated if annotated in QUESTION_CLASSES else UNANNOTATED
        return Classification(label, "annotation", annotated or "", decided_by="annotation")
    if mode == "rules":
        return Classification(rule_question_class(question), "rules", decided_by="rules")
    if lm is None:
        raise ValueError("classifier=lm needs a language model")
    if by not in CLASSIFY_BY:
        raise ValueError(f"classify_by must be one of {CLASSIFY_BY}, got {by!r}")
    if by == "likelihood":
        label, scores = class_by_likelihood(question, lm, score, prompt)
        raw = " ".join(f"{c}={scores[c]:.4f}" for c in QUESTION_CLASSES)
        return Classification(label, "lm", raw, decided_by="likelihood")
    raw = lm.chat([classify_prompt(prompt).format(question=question.strip())], max_new_tokens)[0]
    label = parse_question_class(raw)
    if label is None:
        return Classification(rule_question_class(question), "rules", raw, lm_parsed=False, decided_by="rules")
    return Classification(label, "lm", raw, lm_parsed=True, decided_by="generation")


def table_of_contents(document: str, lm: ChatLM, max_new_tokens: int = 200) -> str:
    """The LM's table of contents of ``document`` (already cut to the LM's input allowance)."""
    raw = lm.chat([TOC_PROMPT.format(document=document)], max_new_tokens)[0]
    lines = [line.strip() for line in raw.splitlines() if line.strip()]
    return "\n".join(lines)


MAX_SUBQUESTION_WORDS = 40

_ENUMERATION = re.compile(
    r"^\s*(?:[-*\u2022]+|\(?\d{1,2}[.):]|\(?[a-z][.)]|(?:sub-?question|question|q)\s*\d*\s*[:.)-])\s*",
    re.IGNORECASE,
)


def parse_subquestions(output: str, max_subquestions: int) -> list[str]:
    """Sub-questions from one-per-line output: numbering, bullets and "Question:" labels stripped,
    each cut after its first question mark and to ``MAX_SUBQUESTION_WORDS`` words, lines of fewer
    than three words and header lines (ending in ":") dropped, case-insensitive duplicates dropped,
    at most ``max_subquestions`` kept."""
    found: list[str] = []
    seen: set[str] = set()
    for line in (output or "").splitlines():
        text = line.strip()
        while True:  # "* Sub-question 3: ..." carries two markers
            stripped = _ENUMERATION.sub("", text).strip().strip('"').strip()
            if stripped == text:
                break
            text = stripped
        if "?" in text:  # a question ends at its question mark; what follows is commentary
            text = text[: text.index("?") + 1]
        # A runaway generation (a small LM repeating itself) is cut to a question's length.
        text = " ".join(text.split()[:MAX_SUBQUESTION_WORDS])
        if len(text.split()) < 3 or text.endswith(":"):  # too short, or a header ("Here are ...:")
            continue
        key = " ".join(text.lower().split())
        if key in seen:
            continue
        seen.add(key)
        found.append(text)
        if len(found) == max_subquestions:
            break
    return found


def decompose_question(
    question: str, toc: str, lm: ChatLM, max_subquestions: int = 4, max_new_tokens: int = 150
) -> tuple[list[str], str, str]:
    """(sub-questions, source, raw output): source ``lm``, or ``fallback`` (the question itself) when
    nothing parseable came back."""
    prompt = DECOMPOSE_PROMPT.format(toc=toc or "(none)", question=question.strip(), max_subquestions=max_subquestions)
    raw = lm.chat([prompt], max_new_tokens)[0]
    subquestions = parse_subquestions(raw, max_subquestions)
    if not subquestions:
        return [question.strip()], "fallback", raw
    return subquestions, "lm", raw
