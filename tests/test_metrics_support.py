"""The official evidence metrics on the packed context, against values worked out by hand from each script's
definition (HotpotQA's update_sp and joint metrics, MuSiQue's SupportMetric, QASPER's paragraph_f1_score)."""

from __future__ import annotations

import json
import math

import pytest

from harness.core.types import Context, Document, Example, Snippet
from harness.data.qasper import load_qasper
from harness.metrics.answers import answer_precision_recall, exact_match
from harness.metrics.support import (
    evidence_scores,
    joint_scores,
    paragraph_f1,
    sentences_in_context,
    set_scores,
    support_scores,
    supporting_fact_scores,
)


def snippet(text: str, doc_id: str, truncated: bool = False, sources: tuple[str, ...] | None = None) -> Snippet:
    return Snippet(text, doc_id, sources or (doc_id,), tokens=len(text.split()), truncated=truncated)


def hotpot_example(**metadata) -> Example:
    documents = (
        Document("d0", "Alpha", ("Alpha is a city.", "It lies on a river.", "It has a port.")),
        Document("d1", "Beta", ("Beta is a band.", "Beta formed in 1990.")),
        Document("d2", "Gamma", ("Gamma is a river.",)),
    )
    facts = (("Alpha", 0), ("Beta", 1))
    return Example(
        "q", "Which?", ("Paris France",), ("d0", "d1"), documents, metadata={"supporting_facts": facts, **metadata}
    )


def test_set_scores_follow_update_sp_and_musique_s_empty_rule():
    # tp 1, fp 2, fn 1: precision 1/3, recall 1/2, F1 = 2 * (1/6) / (5/6) = 0.4, EM 0.
    em, precision, recall, f1 = set_scores({"a", "b", "c"}, {"a", "d"})
    assert (em, precision, recall) == (0.0, pytest.approx(1 / 3), 0.5) and f1 == pytest.approx(0.4)
    assert set_scores({"a"}, {"a"}) == (1.0, 1.0, 1.0, 1.0)
    # Both empty: HotpotQA's update_sp gives EM 1 but F1 0; MuSiQue's SupportMetric sets both to 1.
    assert set_scores(set(), set()) == (1.0, 0.0, 0.0, 0.0)
    assert set_scores(set(), set(), empty_is_perfect=True) == (1.0, 0.0, 0.0, 1.0)


def test_supporting_facts_are_the_context_s_sentences_against_the_record_s_facts():
    example = hotpot_example()
    context = Context(
        [
            snippet("Alpha is a city.", "d0"),
            snippet("It lies on a river.", "d0"),
            snippet("Beta is a band.", "d1"),
            snippet("Beta formed in", "d1", truncated=True),  # a budget-cut fragment credits nothing
        ],
        budget=50,
        packer="test",
    )
    assert sentences_in_context(context, example) == {("d0", 0), ("d0", 1), ("d1", 0)}
    # Predicted {(Alpha,0), (Alpha,1), (Beta,0)} against gold {(Alpha,0), (Beta,1)}: tp 1, fp 2, fn 1.
    scores = supporting_fact_scores(context, example)
    assert scores == {"sp_em": 0.0, "sp_f1": pytest.approx(0.4), "sp_precision": pytest.approx(1 / 3), "sp_recall": 0.5}


def test_a_window_or_whole_document_snippet_credits_every_sentence_it_holds():
    example = hotpot_example()
    whole = Context([snippet("Beta is a band. Beta formed in 1990.", "d1")], budget=None, packer="test")
    assert sentences_in_context(whole, example) == {("d1", 0), ("d1", 1)}
    # A summary of two documents is not their sentences, even when it repeats one word for word.
    summary = Context([snippet("Alpha is a city.", "s1", sources=("d0", "d1"))], budget=None, packer="test")
    assert sentences_in_context(summary, example) == set()
    assert supporting_fact_scores(summary, example)["sp_recall"] == 0.0


def test_2wiki_titles_are_compared_lower_cased_and_hotpotqa_titles_as_written():
    example = hotpot_example()
    facts = (("alpha", 0), ("BETA", 1))
    context = Context([snippet("Alpha is a city.", "d0"), snippet("Beta formed in 1990.", "d1")], None, "test")
    exact = Example(**{**example.__dict__, "metadata": {"supporting_facts": facts}})
    lowered = Example(
        **{**example.__dict__, "metadata": {"supporting_facts": facts, "supporting_fact_titles": "lowercase"}}
    )
    assert supporting_fact_scores(context, exact)["sp_em"] == 0.0
    assert supporting_fact_scores(context, lowered)["sp_em"] == 1.0


def test_a_fact_past_the_paragraph_s_end_stays_in_the_gold_set_as_the_official_script_keeps_it():
    example = Example(**{**hotpot_example().__dict__, "metadata": {"supporting_facts": (("Gamma", 0), ("Gamma", 5))}})
    context = Context([snippet("Gamma is a river.", "d2")], None, "test")
    # tp 1, fn 1 (the sentence that does not exist): recall 1/2, precision 1, F1 2/3.
    assert supporting_fact_scores(context, example)["sp_f1"] == pytest.approx(2 / 3)


def test_joint_scores_multiply_the_answer_s_precision_and_recall_with_the_sp_ones():
    # Answer "Paris" against "Paris France": EM 0, precision 1, recall 1/2. sp precision 1/3, recall 1/2:
    # joint precision 1/3, joint recall 1/4, joint F1 = 2 * (1/12) / (7/12) = 2/7, joint EM 0 * 0 = 0.
    precision, recall = answer_precision_recall("Paris", ["Paris France"], "hotpotqa")
    figures = {"sp_em": 0.0, "sp_precision": 1 / 3, "sp_recall": 0.5}
    joint = joint_scores(exact_match("Paris", ["Paris France"]), precision, recall, figures)
    assert joint == {"joint_em": 0.0, "joint_f1": pytest.approx(2 / 7)}
    assert joint_scores(1.0, 1.0, 1.0, {"sp_em": 1.0, "sp_precision": 1.0, "sp_recall": 1.0}) == {
        "joint_em": 1.0,
        "joint_f1": 1.0,
    }
    assert joint_scores(1.0, 1.0, 1.0, {}) == {}  # no sentence-level support: no joint score
    assert joint_scores(1.0, 1.0, 1.0, {"sp_em": math.nan, "sp_precision": 1.0, "sp_recall": 1.0}) == {}


def test_support_scores_are_musique_s_paragraph_f1():
    example = hotpot_example()
    # Documents d0 and d2 contribute whole snippets (d1 only a fragment): {d0, d2} against gold {d0, d1}:
    # precision 1/2, recall 1/2, F1 1/2, EM 0.
    context = Context(
        [snippet("Alpha is a city.", "d0"), snippet("Gamma is a river.", "d2"), snippet("Beta", "d1", True)], None, "t"
    )
    assert support_scores(context, example) == {"support_em": 0.0, "support_f1": 0.5}
    everything = Context([snippet("Alpha is a city.", "d0"), snippet("Beta is a band.", "d1")], None, "t")
    assert support_scores(everything, example) == {"support_em": 1.0, "support_f1": 1.0}
    no_gold = Example("q", "?", ("a",), (), example.documents)
    assert support_scores(everything, no_gold) == {}


def test_paragraph_f1_is_qasper_s():
    assert paragraph_f1(set(), []) == 1.0  # unanswerable, nothing predicted
    assert paragraph_f1({"p"}, []) == 0.0
    # {p1, p2} against [p1]: precision 1/2, recall 1, F1 2/3.
    assert paragraph_f1({"p1", "p2"}, ["p1"]) == pytest.approx(2 / 3)


def qasper_paper(tmp_path):
    paragraphs = [
        "Zero one.",
        "First paragraph holds the method. It uses BERT.",
        "Second paragraph lists the results.",
    ]
    answers = [
        {"answer": {"unanswerable": False, "extractive_spans": ["BERT"], "yes_no": None, "free_form_answer": "",
                    "evidence": [paragraphs[1]], "highlighted_evidence": []}, "annotation_id": "a1"},
        {"answer": {"unanswerable": False, "extractive_spans": [], "yes_no": None, "free_form_answer": "BERT",
                    "evidence": [paragraphs[0], "FLOAT SELECTED: Table 1"], "highlighted_evidence": []},
         "annotation_id": "a2"},
        {"answer": {"unanswerable": True, "extractive_spans": [], "yes_no": None, "free_form_answer": "",
                    "evidence": [paragraphs[2]], "highlighted_evidence": []}, "annotation_id": "a3"},
    ]  # fmt: skip
    paper = {
        "p1": {
            "title": "A paper",
            "abstract": "",
            "full_text": [{"section_name": "Intro", "paragraphs": paragraphs}],
            "qas": [{"question": "What is used?", "question_id": "q1", "answers": answers}],
        }
    }
    path = tmp_path / "qasper.json"
    path.write_text(json.dumps(paper))
    # Eight-word chunks: [Zero one. First paragraph holds the method.] [It uses BERT. Second paragraph lists
    # the results.]: both cross a paragraph boundary.
    (example,) = load_qasper(path, chunk_tokens=8)
    assert [len(doc.sentences) for doc in example.documents] == [2, 2]
    return example, paragraphs


def test_qasper_evidence_f1_traces_the_context_s_sentences_to_their_paragraphs(tmp_path):
    example, paragraphs = qasper_paper(tmp_path)
    by_text = {s: doc.doc_id for doc in example.documents for s in doc.sentences}
    chosen = ["It uses BERT.", "Second paragraph lists the results."]
    context = Context([snippet(text, by_text[text]) for text in chosen], None, "t")
    # Predicted paragraphs {1, 2}. Annotator 1: [p1] -> precision 1/2, recall 1, F1 2/3. Annotator 2: [p0]
    # once the table evidence is left out -> 0. Annotator 3 is unanswerable: evidence [] -> 0. Max 2/3.
    assert evidence_scores(context, example) == {"evidence_f1": pytest.approx(2 / 3)}
    # Nothing reached the reader: the unanswerable annotation's empty evidence matches (1.0).
    assert evidence_scores(Context([], None, "t"), example) == {"evidence_f1": 1.0}
    assert evidence_scores(context, hotpot_example()) == {}


def test_evidence_that_matches_no_paragraph_stays_in_the_gold_set(tmp_path):
    from harness.data.qasper import evidence_as_paragraphs

    index = {"p zero": 0, "p one": 1}
    evidence = [["p one", "a text from no paragraph", "FLOAT SELECTED: Figure 2"], ["p zero"]]
    matched, unmatched = evidence_as_paragraphs(evidence, ["extractive", "unanswerable"], index)
    assert matched == ((1,), ()) and unmatched == (1, 0)
    example, _ = qasper_paper(tmp_path)
    assert example.metadata["evidence_paragraphs"] == ((1,), (0,), ())
    assert example.metadata["evidence_unmatched"] == (0, 0, 0)
    # The chunks know each sentence's paragraph: [0, 1] and [1, 2].
    assert [doc.sentence_paragraphs for doc in example.documents] == [(0, 1), (1, 2)]
