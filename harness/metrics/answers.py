"""Answer scoring as in the official SQuAD v1.1 and HotpotQA evaluation scripts.

Normalisation, exact match and token F1 reproduce those scripts so that figures are comparable
with published ones; the only addition is the maximum over a question's gold answer and aliases.
"""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Iterable

# str.translate deletes them in C (a per-character generator was most of the time of scoring a context).
_DELETE_PUNCTUATION = str.maketrans("", "", string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b")
# HotpotQA scores these special answers all-or-nothing: a partial token overlap with "yes" is meaningless.
_SPECIAL_ANSWERS = frozenset({"yes", "no", "noanswer"})


def normalize_answer(s: str) -> str:
    """Lower-case, drop punctuation, drop the articles a/an/the and collapse whitespace (SQuAD v1.1 order)."""
    text = s.lower()
    text = text.translate(_DELETE_PUNCTUATION)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def answer_tokens(s: str) -> list[str]:
    """The whitespace tokens of the normalised answer."""
    return normalize_answer(s).split()


def as_answer_list(answers: str | Iterable[str]) -> list[str]:
    """Gold answers as a list: one string is one answer; anything else must hold only strings."""
    if isinstance(answers, str):
        return [answers]
    answer_list = list(answers)
    for answer in answer_list:
        if not isinstance(answer, str):
            raise TypeError(f"gold answers must be strings, got {answer!r} ({type(answer).__name__})")
    return answer_list


def _exact_match_single(prediction: str, ground_truth: str) -> float:
    return float(normalize_answer(prediction) == normalize_answer(ground_truth))


def _f1_single(prediction: str, ground_truth: str) -> float:
    normalized_prediction = normalize_answer(prediction)
    normalized_ground_truth = normalize_answer(ground_truth)
    if normalized_prediction != normalized_ground_truth and (
        normalized_prediction in _SPECIAL_ANSWERS or normalized_ground_truth in _SPECIAL_ANSWERS
    ):
        return 0.0
    prediction_tokens = normalized_prediction.split()
    ground_truth_tokens = normalized_ground_truth.split()
    num_same = sum((Counter(prediction_tokens) & Counter(ground_truth_tokens)).values())
    if num_same == 0:
        return 0.0
    precision = num_same / len(prediction_tokens)
    recall = num_same / len(ground_truth_tokens)
    return 2 * precision * recall / (precision + recall)


def exact_match(prediction: str, answers: str | Iterable[str]) -> float:
    """1.0 if the normalised prediction equals some normalised gold answer or alias; 0.0 if none (or no answers)."""
    return max((_exact_match_single(prediction, gt) for gt in as_answer_list(answers)), default=0.0)


def f1_score(prediction: str, answers: str | Iterable[str]) -> float:
    """Token F1 of the prediction, maximised over the gold answer and its aliases (0.0 with no answers)."""
    return max((_f1_single(prediction, gt) for gt in as_answer_list(answers)), default=0.0)
