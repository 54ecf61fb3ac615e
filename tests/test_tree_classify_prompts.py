"""The classification prompts: the few-shot examples are none of the evaluation questions, the prompt a tree is
configured with is the one its LM is asked and the one its cache key names, and the likelihood scores are the
sums, means and calibrated sums worked out by hand."""

from __future__ import annotations

import math

import pytest

from harness.data.qasper import load_qasper
from harness.data.quality import load_quality
from harness.tree.classify_prompts import CLASSIFY_PROMPTS, EXAMPLES, FEW_SHOT, ZERO_SHOT, classify_prompt
from harness.tree.dtcrs import DynamicTree
from harness.tree.questions import CLASSIFY_PROMPT, classify_question, likelihood_scores
from tests.conftest import SHARED_DATA
from tests.helpers.tree_fakes import FakeChatLM


def _words(text: str) -> str:
    return " ".join(text.lower().split())


def test_no_few_shot_example_is_a_question_of_the_sets_classifiers_are_scored_on():
    qasper = load_qasper(SHARED_DATA / "qasper" / "qasper-original-sample.json", chunk_tokens=500, tokenizer=None)
    quality = load_quality(SHARED_DATA / "quality" / "quality_example.jsonl", chunk_tokens=500, tokenizer=None)
    asked = {_words(e.question) for e in [*qasper, *quality]}
    assert len(asked) > 50
    assert not {_words(question) for question, _ in EXAMPLES} & asked
    # two examples of each class, and every example inside the prompt
    assert sorted(label for _, label in EXAMPLES) == sorted(["extractive", "abstractive", "yes/no", "unanswerable"] * 2)
    assert all(f"Question: {q}\nType: {label}" in FEW_SHOT for q, label in EXAMPLES)


def test_the_zero_shot_prompt_is_the_classification_prompt_trees_have_always_used():
    assert ZERO_SHOT == CLASSIFY_PROMPT and CLASSIFY_PROMPTS["zero_shot"] is ZERO_SHOT
    with pytest.raises(ValueError, match=r"classify_prompt must be one of \('zero_shot', 'few_shot'\), got 'three'"):
        classify_prompt("three")


@pytest.mark.parametrize("prompt", ["zero_shot", "few_shot"])
def test_the_lm_is_asked_the_prompt_the_classifier_names(prompt):
    lm = FakeChatLM(question_class="yes/no")
    decided = classify_question("Does the model use attention?", lm, "lm", by="generation", prompt=prompt)
    assert decided.label == "yes_no" and decided.lm_parsed
    assert lm.prompts == [CLASSIFY_PROMPTS[prompt].format(question="Does the model use attention?")]


def test_a_trees_cache_key_names_its_classification_prompt():
    zero, few = (DynamicTree(lm=FakeChatLM(), classify_prompt=p) for p in ("zero_shot", "few_shot"))
    assert zero.question_key()["prompts"][0] == CLASSIFY_PROMPT  # unchanged: trees built before keep their keys
    assert few.question_key()["prompts"][0] == FEW_SHOT
    with pytest.raises(ValueError, match="tree 'dtcrs': classify_prompt must be one of"):
        DynamicTree(lm=FakeChatLM(), classify_prompt="fewshot")


def test_likelihood_scores_are_the_sums_means_and_calibrated_sums_worked_by_hand():
    logprobs = [[-1.0, -2.0], [-0.5], [-3.0, -1.0, -2.0], [-4.0]]  # extractive, abstractive, yes_no, unanswerable
    prior = [[-2.0, -2.0], [-0.25], [-1.0], [-1.0]]
    assert likelihood_scores(logprobs, "sum") == {
        "extractive": -3.0,
        "abstractive": -0.5,
        "yes_no": -6.0,
        "unanswerable": -4.0,
    }
    per_token = likelihood_scores(logprobs, "per_token")
    assert per_token["extractive"] == -1.5 and per_token["yes_no"] == -2.0 and per_token["abstractive"] == -0.5
    calibrated = likelihood_scores(logprobs, "calibrated", prior)
    assert calibrated == {"extractive": 1.0, "abstractive": -0.25, "yes_no": -5.0, "unanswerable": -3.0}
    assert max(calibrated, key=lambda c: calibrated[c]) == "extractive"
    with pytest.raises(ValueError, match="content-free"):
        likelihood_scores(logprobs, "calibrated")
    assert not any(math.isnan(v) for v in per_token.values())
