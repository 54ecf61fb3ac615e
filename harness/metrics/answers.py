"""Answer scoring as each dataset's official evaluation script scores it.

Normalisation (lower-case, punctuation, articles, whitespace) and exact match are the same in every
script; token F1 differs in two edge cases, so a dataset config names its rule (``answer_scorer``):

- ``hotpotqa``: HotpotQA's ``hotpot_evaluate_v1.py`` and 2WikiMultihopQA's ``evaluate_v1.1``: a
  prediction or gold answer that normalises to ``yes``, ``no`` or ``noanswer`` scores F1 0 unless both
  are equal ("no" against "No Doubt" is 0).
- ``squad``: SQuAD v1.1's ``evaluate-v1.1.py`` (COVID-QA, RAGBench, BEIR, the demo): no special answers
  ("no" against "No Doubt" is 0.667); no shared token, an empty side included, is F1 0.
- ``musique``: MuSiQue's ``evaluate_v1.0.py`` (its ``metrics/answer.py``, SQuAD v2.0's ``compute_f1``):
  as ``squad``, except that an empty normalised prediction against an empty normalised gold is 1.

Over several gold answers (an answer and its aliases) EM and F1 are the maximum, as every script does;
:func:`answer_precision_recall` gives the precision and recall that the HotpotQA/2Wiki joint metrics
need, each maximised on its own (2Wiki's ``update_answer``; with one gold answer, HotpotQA's).
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


ANSWER_SCORERS = ("hotpotqa", "squad", "musique")
DEFAULT_ANSWER_SCORER = "squad"


def check_answer_scorer(rule: str) -> str:
    """``rule`` if it names an answer scorer, else a ValueError naming the choices."""
    if rule not in ANSWER_SCORERS:
        raise ValueError(f"dataset.answer_scorer must be one of {', '.join(ANSWER_SCORERS)}; got {rule!r}")
    return rule


def _prf_single(prediction: str, ground_truth: str, rule: str) -> tuple[float, float, float]:
    """(F1, precision, recall) of one prediction against one gold answer under ``rule``."""
    normalized_prediction = normalize_answer(prediction)
    normalized_ground_truth = normalize_answer(ground_truth)
    if (
        rule == "hotpotqa"
        and normalized_prediction != normalized_ground_truth
        and (normalized_prediction in _SPECIAL_ANSWERS or normalized_ground_truth in _SPECIAL_ANSWERS)
    ):
        return 0.0, 0.0, 0.0
    prediction_tokens = normalized_prediction.split()
    ground_truth_tokens = normalized_ground_truth.split()
    if rule == "musique" and not (prediction_tokens and ground_truth_tokens):
        agree = float(prediction_tokens == ground_truth_tokens)
        return agree, agree, agree
    num_same = sum((Counter(prediction_tokens) & Counter(ground_truth_tokens)).values())
    if num_same == 0:
        return 0.0, 0.0, 0.0
    precision = num_same / len(prediction_tokens)
    recall = num_same / len(ground_truth_tokens)
    return 2 * precision * recall / (precision + recall), precision, recall


def exact_match(prediction: str, answers: str | Iterable[str]) -> float:
    """1.0 if the normalised prediction equals some normalised gold answer or alias; 0.0 if none (or no answers)."""
    return max((_exact_match_single(prediction, gt) for gt in as_answer_list(answers)), default=0.0)


def f1_score(prediction: str, answers: str | Iterable[str], rule: str = DEFAULT_ANSWER_SCORER) -> float:
    """Token F1 of the prediction under the dataset's ``rule``, maximised over the gold answer and its
    aliases (0.0 with no answers)."""
    check_answer_scorer(rule)
    return max((_prf_single(prediction, gt, rule)[0] for gt in as_answer_list(answers)), default=0.0)


def answer_precision_recall(
    prediction: str, answers: str | Iterable[str], rule: str = DEFAULT_ANSWER_SCORER
) -> tuple[float, float]:
    """Token precision and recall, each maximised over the gold answers on its own (the joint metrics'
    inputs in HotpotQA's and 2Wiki's scripts); (0.0, 0.0) with no answers."""
    check_answer_scorer(rule)
    scores = [_prf_single(prediction, gt, rule) for gt in as_answer_list(answers)]
    return max((s[1] for s in scores), default=0.0), max((s[2] for s in scores), default=0.0)
