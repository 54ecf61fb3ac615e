"""Question analysis for the dynamic tree: parsing the LM's class, rule fallback, the annotated class,
sub-question parsing."""

from __future__ import annotations

import math

import pytest

from harness.core.types import Example
from harness.tree.questions import (
    UNANNOTATED,
    annotated_question_class,
    annotation_class,
    classifier_mode,
    classify_question,
    decompose_question,
    parse_question_class,
    parse_subquestions,
    rule_question_class,
    table_of_contents,
)


class Scripted:
    """Returns fixed outputs in turn and records the prompts."""

    def __init__(self, *outputs):
        self.outputs = list(outputs)
        self.prompts = []

    def chat(self, prompts, max_new_tokens):
        self.prompts.extend(prompts)
        return [self.outputs.pop(0) for _ in prompts]


@pytest.mark.parametrize(
    "output, label",
    [
        ("abstractive", "abstractive"),
        ("Type: Extractive.", "extractive"),
        ("yes/no", "yes_no"),
        ("Yes-no", "yes_no"),
        ("boolean", "yes_no"),
        ("unanswerable", "unanswerable"),
        ("The question is unanswerable", "unanswerable"),
        ("extractive or abstractive", None),  # names two classes: not a decision
        # SmolLM2 echoes the option list: unparsed, never its first word.
        ("Extractive, abstractive, yes/", None),
        ("Extractive, abstractive, yes/...", None),
        ("extractive, abstractive, yes/no or unanswerable", None),
        ("", None),
        ("I think it is a question", None),
    ],
)
def test_parse_question_class(output, label):
    assert parse_question_class(output) == label


@pytest.mark.parametrize(
    "question, label",
    [
        ("Is the dataset balanced?", "yes_no"),
        ("Do they use BERT?", "yes_no"),
        ("How big is the Japanese data?", "extractive"),
        ("How many annotators were there?", "extractive"),
        ("How are relations used to propagate polarity?", "abstractive"),
        ("Why does the model fail on long inputs?", "abstractive"),
        ("What are the results?", "abstractive"),
        ("What is the seed lexicon?", "extractive"),
        ("Which datasets are used?", "extractive"),
        ("", "extractive"),
    ],
)
def test_rule_question_class(question, label):
    assert rule_question_class(question) == label


def test_classify_uses_the_lm_then_rules_and_says_whether_the_output_was_parsed():
    lm = Scripted("Abstractive")
    got = classify_question("What is the seed lexicon?", lm)
    assert (got.label, got.source, got.raw, got.lm_parsed) == ("abstractive", "lm", "Abstractive", True)
    assert "What is the seed lexicon?" in lm.prompts[0]
    got = classify_question("Do they use BERT?", Scripted("hmm"))
    assert (got.label, got.source, got.lm_parsed) == ("yes_no", "rules", False)
    # The echoed option list falls back to the rules, not to "extractive".
    got = classify_question("Why does it fail?", Scripted("Extractive, abstractive, yes/"))
    assert (got.label, got.source, got.lm_parsed) == ("abstractive", "rules", False)
    got = classify_question("Why is it?", None, mode="rules")
    assert (got.label, got.source, got.lm_parsed) == ("abstractive", "rules", None)
    with pytest.raises(ValueError, match="classifier"):
        classify_question("Why?", None, mode="oracle")
    with pytest.raises(ValueError, match="language model"):
        classify_question("Why?", None, mode="lm")


def test_annotation_classifier_routes_by_the_annotated_class_and_never_guesses():
    got = classify_question("Why?", None, mode="annotation", annotated="yes_no")
    assert (got.label, got.source, got.lm_parsed) == ("yes_no", "annotation", None)
    for missing in (None, "", UNANNOTATED):
        got = classify_question("Why does it fail?", None, mode="annotation", annotated=missing)
        assert (got.label, got.source) == (UNANNOTATED, "annotation")  # not the rules' "abstractive"
    # ``gold`` is the older name of the annotation classifier.
    assert classifier_mode("gold") == "annotation"
    assert classify_question("Why?", None, mode="gold", annotated="extractive").source == "annotation"
    assert annotation_class("none") == "unanswerable" and annotation_class("Yes/No") == "yes_no"
    assert annotation_class("bridge") is None


def _example(qtype="", **metadata):
    return Example("q", "Why?", ("a",), (), (), qtype=qtype, dataset="qasper", metadata=metadata)


def test_annotated_class_is_the_annotators_majority_ties_to_the_first_named():
    got = annotated_question_class(_example("extractive", answer_types=("extractive", "abstractive", "abstractive")))
    assert (got.label, got.agreement, got.annotators) == ("abstractive", 2 / 3, 3)
    got = annotated_question_class(_example("yes_no", answer_types=("yes_no", "unanswerable")))
    assert (got.label, got.agreement, got.annotators) == ("yes_no", 0.5, 2)
    assert annotated_question_class(_example("extractive", answer_types=("extractive",))).agreement == 1.0
    # A loader's single answer type (QuALITY, NarrativeQA) and, failing that, a qtype that names a class.
    assert annotated_question_class(_example("hard", answer_type="abstractive")).label == "abstractive"
    assert annotated_question_class(_example("abstractive")).label == "abstractive"


@pytest.mark.parametrize(
    "example",
    [
        _example(),  # a QASPER record without an answer type
        _example(answer_types=()),
        _example(answer_types=("", None)),
        _example("bridge"),  # HotpotQA's question type is not an answer class
    ],
)
def test_a_question_without_an_annotated_type_is_unannotated(example):
    got = annotated_question_class(example)
    assert (got.label, got.annotators) == (UNANNOTATED, 0) and math.isnan(got.agreement)


def test_parse_subquestions_strips_numbering_drops_short_and_duplicate_lines():
    output = """Here are the sub-questions:
1. What is the seed lexicon?
2) How are discourse relations extracted?
- How are discourse relations extracted?
* Sub-question 3: What corpus is used for training?
ok
Q4: What results are reported on ACP?"""
    assert parse_subquestions(output, 10) == [
        "What is the seed lexicon?",
        "How are discourse relations extracted?",
        "What corpus is used for training?",
        "What results are reported on ACP?",
    ]
    assert parse_subquestions(output, 2) == ["What is the seed lexicon?", "How are discourse relations extracted?"]
    assert parse_subquestions("", 3) == []


def test_parse_subquestions_cuts_labels_commentary_and_runaway_lines():
    output = (
        """Question: How are relations used?
How are relations used? They are used a lot.
"""
        + "a seed that can be used to create " * 20
    )
    subs = parse_subquestions(output, 5)
    assert subs[0] == "How are relations used?"
    assert len(subs) == 2 and len(subs[1].split()) == 40 and subs[1].startswith("a seed that can be used")


def test_decomposition_is_grounded_in_the_table_of_contents_and_falls_back_to_the_question():
    lm = Scripted("1. What does section one say?\n2. What does section two say?")
    subs, source, _ = decompose_question("Summarise the paper?", "1. Intro\n2. Method", lm, max_subquestions=3)
    assert subs == ["What does section one say?", "What does section two say?"] and source == "lm"
    assert "1. Intro\n2. Method" in lm.prompts[0] and "at most 3" in lm.prompts[0]
    subs, source, _ = decompose_question("Summarise the paper?", "", Scripted("no"), max_subquestions=3)
    assert subs == ["Summarise the paper?"] and source == "fallback"


def test_table_of_contents_keeps_non_blank_lines():
    lm = Scripted("\n1. Introduction\n\n  2. Method  \n")
    assert table_of_contents("some document text", lm) == "1. Introduction\n2. Method"
    assert "some document text" in lm.prompts[0]
