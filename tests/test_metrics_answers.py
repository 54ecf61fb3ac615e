import re
import string
from collections import Counter

import pytest

from harness.metrics import answer_tokens, exact_match, f1_score, normalize_answer
from harness.metrics.answers import answer_precision_recall


# The official SQuAD v1.1 / HotpotQA functions, kept verbatim as the reference to agree with.
def _official_normalize_answer(s):
    def remove_articles(text):
        return re.sub(r"\b(a|an|the)\b", " ", text)

    def white_space_fix(text):
        return " ".join(text.split())

    def remove_punc(text):
        exclude = set(string.punctuation)
        return "".join(ch for ch in text if ch not in exclude)

    def lower(text):
        return text.lower()

    return white_space_fix(remove_articles(remove_punc(lower(s))))


def _official_hotpot_f1(prediction, ground_truth):
    normalized_prediction = _official_normalize_answer(prediction)
    normalized_ground_truth = _official_normalize_answer(ground_truth)
    if normalized_prediction in ["yes", "no", "noanswer"] and normalized_prediction != normalized_ground_truth:
        return 0
    if normalized_ground_truth in ["yes", "no", "noanswer"] and normalized_prediction != normalized_ground_truth:
        return 0
    prediction_tokens = normalized_prediction.split()
    ground_truth_tokens = normalized_ground_truth.split()
    common = Counter(prediction_tokens) & Counter(ground_truth_tokens)
    num_same = sum(common.values())
    if num_same == 0:
        return 0
    precision = 1.0 * num_same / len(prediction_tokens)
    recall = 1.0 * num_same / len(ground_truth_tokens)
    return (2 * precision * recall) / (precision + recall)


STRINGS = [
    "The Eiffel Tower.",
    "  An  apple a day ",
    "theatre of the absurd",
    "U.S.A.",
    "Obama's first term (2009-2013)",
    "yes",
    "No.",
    "noanswer",
    "",
    "A",
    "Barack Hussein Obama",
    "the cat cat sat",
    "Ça va? Très bien!",
]


def test_normalize_answer_worked_examples():
    assert normalize_answer("The Quick, Brown Fox!") == "quick brown fox"
    assert normalize_answer("  An  apple a day ") == "apple day"
    assert normalize_answer("The theatre") == "theatre"  # articles only as whole words
    assert normalize_answer("U.S.A.") == "usa"  # punctuation is deleted, not replaced by a space
    assert normalize_answer("Obama's") == "obamas"
    assert answer_tokens("The New-York  Times") == ["newyork", "times"]


@pytest.mark.parametrize("text", STRINGS)
def test_normalize_answer_matches_official_script(text):
    assert normalize_answer(text) == _official_normalize_answer(text)


@pytest.mark.parametrize("prediction", STRINGS)
@pytest.mark.parametrize("gold", STRINGS)
def test_f1_matches_official_hotpot_script(prediction, gold):
    assert f1_score(prediction, [gold]) == pytest.approx(_official_hotpot_f1(prediction, gold))


def test_exact_match_articles_punctuation_and_aliases():
    assert exact_match("the Eiffel Tower.", ["Eiffel Tower"]) == 1.0
    assert exact_match("NYC", ["New York City", "NYC"]) == 1.0
    assert exact_match("New York", ["New York City", "NYC"]) == 0.0
    assert exact_match("Paris", "paris!") == 1.0  # a single answer string is accepted
    assert exact_match("Paris", []) == 0.0


def test_f1_worked_by_hand():
    # P = 2/2, R = 2/3 -> F1 = 2 * (2/3) / (5/3) = 0.8
    assert f1_score("Barack Obama", ["Barack Hussein Obama"]) == pytest.approx(0.8)
    # pred [cat, cat, sat], gold [cat, sat, on, mat]: overlap 2 (cat counted once), P = 2/3, R = 1/2 -> 4/7
    assert f1_score("the cat cat sat", ["cat sat on mat"]) == pytest.approx(4 / 7)
    # max over aliases: 0.8 against the first, 0.5 against the second
    assert f1_score("Barack Obama", ["Barack Hussein Obama", "President Obama"]) == pytest.approx(0.8)
    assert f1_score("Obama", ["Barack Hussein Obama", "Obama"]) == 1.0
    assert f1_score("London", ["Paris"]) == 0.0
    assert f1_score("anything", []) == 0.0


def test_f1_yes_no_rule_is_hotpotqa_s():
    rule = "hotpotqa"
    assert f1_score("Yes.", ["yes"], rule) == 1.0
    assert f1_score("yes sir", ["yes"], rule) == 0.0  # gold is special and differs: no partial credit
    assert f1_score("no", ["no way"], rule) == 0.0  # prediction is special and differs
    assert f1_score("noanswer", ["no answer"], rule) == 0.0
    assert f1_score("yes sir", ["yes", "yes sir"], rule) == 1.0  # the rule applies per alias, then the max


def test_squad_and_musique_give_partial_credit_to_yes_and_no():
    # "no" against "No Doubt": one shared token, precision 1/1, recall 1/2, F1 = 2 * 0.5 / 1.5 = 0.667.
    for rule in ("squad", "musique"):
        assert f1_score("no", ["No Doubt"], rule) == pytest.approx(2 / 3)
        assert f1_score("yes sir", ["yes"], rule) == pytest.approx(2 / 3)
    assert f1_score("no", ["No Doubt"], "hotpotqa") == 0.0


def test_musique_scores_two_empty_answers_one_and_squad_zero():
    # "The" normalises to nothing: SQuAD v1.1 finds no shared token (0); MuSiQue's compute_f1 says the two
    # empty answers agree (1); an empty prediction against a real answer is 0 in both.
    assert f1_score("the", ["The"], "squad") == 0.0
    assert f1_score("the", ["The"], "musique") == 1.0
    assert f1_score("", ["Paris"], "musique") == 0.0
    assert f1_score("", ["Paris"], "squad") == 0.0


def test_an_unknown_answer_scorer_is_named():
    with pytest.raises(ValueError, match=r"answer_scorer must be one of hotpotqa, squad, musique; got 'trec'"):
        f1_score("a", ["a"], "trec")


def test_precision_and_recall_are_each_maximised_over_the_gold_answers():
    # "big red dog" against "red dog" (p 2/3, r 1) and "big red dog house" (p 1, r 3/4): 2Wiki's
    # update_answer keeps the best of each on its own, (1, 1), though no single gold gives both.
    precision, recall = answer_precision_recall("big red dog", ["red dog", "big red dog house"], "hotpotqa")
    assert (precision, recall) == (1.0, 1.0)
    assert answer_precision_recall("no", ["No Doubt"], "hotpotqa") == (0.0, 0.0)
    assert answer_precision_recall("no", ["No Doubt"], "squad") == (1.0, 0.5)


def test_non_string_answer_is_rejected():
    with pytest.raises(TypeError, match="42"):
        exact_match("42", [42])
