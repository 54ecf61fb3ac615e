"""Long-document answer metrics: QASPER answer F1, QuALITY accuracy, NarrativeQA BLEU (sentence and corpus) /
ROUGE-L / METEOR, and the NarrativeQA figures of summary.json and the report."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest
from omegaconf import OmegaConf

from harness.core.types import Example
from harness.metrics.longform import (
    answer_words,
    bleu,
    corpus_bleu_score,
    map_to_option,
    meteor,
    meteor_status,
    narrativeqa_question_scores,
    narrativeqa_scores,
    qasper_answer_f1,
    qasper_scores,
    quality_accuracy,
    rouge_l,
    token_f1,
)
from harness.report.load import Layout
from harness.report.longform import narrativeqa_table
from harness.report.tables import Options
from harness.runlog.outputs import write_outputs


def qasper_example(answers, types, qid="q"):
    return Example(qid, "Q?", tuple(answers), (), (), metadata={"answer_types": tuple(types)})


def test_token_f1_uses_squad_normalisation():
    # "The cat sat." vs "a cat sat down": normalised [cat, sat] vs [cat, sat, down]: P = 1, R = 2/3.
    assert token_f1("The cat sat.", "a cat sat down") == pytest.approx(0.8)
    assert token_f1("Yes", "yes") == 1.0
    assert token_f1("", "Unanswerable") == 0.0


def test_qasper_f1_is_the_max_over_annotators_and_takes_the_best_references_type():
    ex = qasper_example(["seed lexicon of predicates", "Unanswerable"], ["extractive", "unanswerable"])
    assert qasper_answer_f1("Unanswerable", ex) == (1.0, "unanswerable")
    # "the seed lexicon": [seed, lexicon] vs [seed, lexicon, of, predicates]: P = 1, R = 1/2, F1 = 2/3.
    score, kind = qasper_answer_f1("the seed lexicon", ex)
    assert score == pytest.approx(2 / 3) and kind == "extractive"
    # A tie goes to the first reference, as in the official evaluator's stable sort.
    assert qasper_answer_f1("nothing", ex) == (0.0, "extractive")


def test_qasper_scores_average_overall_and_by_type():
    examples = [
        qasper_example(["Yes"], ["yes_no"], "a"),
        qasper_example(["Unanswerable"], ["unanswerable"], "b"),
        qasper_example(["red green"], ["abstractive"], "c"),
    ]
    scores = qasper_scores(["yes", "no idea", "red"], examples)
    assert scores["answer_f1"] == pytest.approx((1.0 + 0.0 + 2 / 3) / 3)
    assert scores["answer_f1_by_type"]["yes_no"] == 1.0
    assert scores["answer_f1_by_type"]["abstractive"] == pytest.approx(2 / 3)
    assert math.isnan(scores["answer_f1_by_type"]["extractive"])
    assert scores["n_by_type"] == {"extractive": 0, "abstractive": 1, "yes_no": 1, "unanswerable": 1}
    with pytest.raises(ValueError, match="answer_types"):
        qasper_scores(["x"], [Example("z", "Q?", ("a", "b"), (), ())])


OPTIONS = [
    "a criminal that Blake is hunting",
    "a psycheye who taught Blake",
    "an old friend of Blake",
    "Eldoria's alter ego",
]


@pytest.mark.parametrize(
    "answer, index",
    [
        ("B", 1),
        ("(C)", 2),
        ("D.", 3),
        ("(A) a criminal", 0),
        ("C) an old friend", 2),
        ("The answer is B.", 1),
        ("Answer: (D)", 3),
        ("A criminal that Blake is hunting", 0),  # a bare "A" opening a sentence is the article
        ("an old friend", 2),
        ("I do not know", None),
        ("E", None),  # not one of four options: falls through to text matching, which finds nothing
    ],
)
def test_answers_map_to_options(answer, index):
    assert map_to_option(answer, OPTIONS) == index


def test_quality_accuracy_full_and_hard():
    def ex(qid, gold, hard):
        return Example(
            qid, "Q?", (OPTIONS[gold],), (), (), metadata={"options": tuple(OPTIONS), "gold_index": gold, "hard": hard}
        )

    examples = [ex("1", 0, True), ex("2", 1, True), ex("3", 2, False), ex("4", 3, False)]
    scores = quality_accuracy(["A", "C", "an old friend of Blake", "nonsense"], examples)
    assert scores == {"accuracy": 0.5, "accuracy_hard": 0.5, "n": 4, "n_hard": 2, "unmapped": 1}


def test_bleu_by_hand():
    # Hypothesis "the cat sat on the mat" vs reference "the cat sat on a mat": clipped unigram matches
    # the(1) cat sat on mat = 5 of 6; equal lengths, so no brevity penalty.
    assert bleu("the cat sat on the mat", ["the cat sat on a mat"], 1) == pytest.approx(5 / 6)
    # Bigrams: the-cat cat-sat sat-on match, on-the the-mat do not: 3/5; trigrams 2/4; 4-grams 1/3.
    expected = (5 / 6 * 3 / 5 * 2 / 4 * 1 / 3) ** 0.25
    assert bleu("the cat sat on the mat", ["the cat sat on a mat"], 4) == pytest.approx(expected)
    # Brevity penalty uses the reference closest in length: "cat" vs "the cat" alone pays exp(1 - 2/1);
    # with "dog" (length 1) also given, no penalty, and "cat" still matches in "the cat".
    assert bleu("cat", ["the cat"], 1) == pytest.approx(math.exp(1 - 2 / 1))
    assert bleu("cat", ["the cat", "dog"], 1) == pytest.approx(1.0)
    assert bleu("", ["x"], 1) == 0.0
    assert corpus_bleu_score(["the cat sat on the mat"], [["the cat sat on a mat"]], 1) == pytest.approx(5 / 6)


def test_corpus_bleu_of_a_perfect_reader_is_one_even_with_short_answers():
    golds = [["Mark Hunter"], ["to the moon", "the moon"], ["he was killed by his brother"], ["London"]]
    answers = [g[0] for g in golds]
    assert corpus_bleu_score(answers, golds, 1) == 1.0
    assert corpus_bleu_score(answers, golds, 4) == pytest.approx(1.0)
    # nltk's corpus_bleu counts one 4-gram for every answer shorter than four words (max(1, ...)): below 1.
    from nltk.translate.bleu_score import corpus_bleu

    tokens = [[answer_words(r) for r in g] for g in golds]
    assert corpus_bleu(tokens, [answer_words(a) for a in answers]) < 0.9


def test_corpus_bleu_by_hand():
    answers = ["the cat sat on the mat", "a dog"]
    golds = [["the cat sat on a mat"], ["the dog"]]
    # Pooled clipped matches / n-grams: unigrams 5/6 + 1/2 = 6/8; bigrams 3/5 + 0/1 = 3/6; trigrams 2/4 + 0/0;
    # 4-grams 1/3 + 0/0. Lengths 6 + 2 = 8 against 6 + 2: no brevity penalty.
    assert corpus_bleu_score(answers, golds, 1) == pytest.approx(0.75)
    assert corpus_bleu_score(answers, golds, 4) == pytest.approx((6 / 8 * 3 / 6 * 2 / 4 * 1 / 3) ** 0.25)
    assert corpus_bleu_score(answers, golds, 4) == pytest.approx(0.5)
    # One brevity penalty on the pooled lengths: 1 + 6 words against 2 + 6.
    bp = math.exp(1 - 8 / 7)
    assert corpus_bleu_score(["cat", "the cat sat on the mat"], [["the cat"], ["the cat sat on the mat"]], 1) == (
        pytest.approx(bp)
    )
    # Unsmoothed: no 4-gram matched anywhere gives 0; no answer of four words leaves BLEU-4 undefined.
    assert corpus_bleu_score(["a cat on the mat"], [["the cat sat on the mat"]], 4) == 0.0
    assert math.isnan(corpus_bleu_score(["a cat"], [["a cat"]], 4))
    # Where every answer has at least n words, it is nltk's unsmoothed corpus BLEU.
    from nltk.translate.bleu_score import corpus_bleu

    hyps = ["the cat sat on the mat today", "a quick brown dog jumps over it"]
    refs = [["the cat sat on a mat", "a cat sat on the mat today"], ["the quick brown fox jumps over the dog"]]
    expected = corpus_bleu([[answer_words(r) for r in rs] for rs in refs], [answer_words(h) for h in hyps])
    assert corpus_bleu_score(hyps, refs, 4) == pytest.approx(expected)
    with pytest.raises(ValueError, match="predictions"):
        corpus_bleu_score(["a"], [], 1)


def test_rouge_l_by_hand():
    # LCS("a cat sat down", "the cat sat") = "cat sat": P = 2/3, R = 2/4, F = 4/7.
    assert rouge_l("the cat sat", ["a cat sat down"]) == pytest.approx(4 / 7)
    assert rouge_l("the cat sat", ["a cat sat down", "the cat sat"]) == 1.0


def test_meteor_is_reported_unavailable_without_wordnet():
    available, reason = meteor_status()
    scores = narrativeqa_scores(["the moon"], [["to the moon", "the moon"]])
    assert scores["meteor_available"] is available
    if available:
        assert 0 < scores["meteor_mean"] <= 1 and meteor("the moon", ["the moon"]) == pytest.approx(15 / 16)
    else:
        assert "WordNet" in reason and scores["meteor_unavailable_reason"] == reason
        assert math.isnan(scores["meteor_mean"]) and math.isnan(meteor("the moon", ["the moon"]))
    per_question = narrativeqa_question_scores("the moon", ["to the moon", "the moon"])
    assert per_question["bleu1_sentence"] == 1.0 and per_question["rougeL"] == 1.0
    with pytest.raises(ValueError, match="predictions"):
        narrativeqa_scores(["a"], [])


def narrativeqa_rows(answers, golds):
    rows = []
    for i, (answer, gold) in enumerate(zip(answers, golds, strict=True)):
        scores = narrativeqa_question_scores(answer, gold)
        rows.append(
            {"question_id": f"q{i}", "dataset": "narrativeqa", "answer": answer, "gold_answers": json.dumps(gold)}
            | scores
        )
    return pd.DataFrame(rows)


def test_summary_of_a_narrativeqa_run_carries_corpus_bleu(tmp_path, capsys):
    answers = ["the cat sat on the mat", "a dog"]
    golds = [["the cat sat on a mat"], ["the dog"]]
    rows = narrativeqa_rows(answers, golds)
    cfg = OmegaConf.create({"seed": 0, "dataset": {"name": "narrativeqa", "scorers": ["bleu_rouge_meteor"]}})
    payload = write_outputs(cfg, rows, tmp_path, {}, "key", {})
    written = json.loads((tmp_path / "summary.json").read_text())
    corpus = written["corpus_metrics"]["narrativeqa"]
    assert corpus["bleu1_corpus"] == pytest.approx(0.75) and corpus["bleu4_corpus"] == pytest.approx(0.5)
    assert corpus["rougeL_mean"] == pytest.approx(rows["rougeL"].mean()) and corpus["n"] == 2
    assert corpus["bleu4_corpus"] == payload["corpus_metrics"]["narrativeqa"]["bleu4_corpus"]
    # Mean ROUGE-L and METEOR are summary metrics with intervals; the rows' sentence BLEU is not.
    assert "rougeL" in written["metrics"] and "meteor" in written["metrics"]
    assert "bleu4_sentence" not in written["metrics"]
    if corpus["meteor_available"]:
        assert corpus["meteor_mean"] == pytest.approx(rows["meteor"].mean())
    assert "corpus BLEU-1 0.75, BLEU-4 0.5" in capsys.readouterr().out
    # A dataset without the scorer gets no corpus figures.
    other = OmegaConf.create({"seed": 0, "dataset": {"name": "hotpotqa", "scorers": None}})
    assert write_outputs(other, rows, tmp_path, {}, "key", {})["corpus_metrics"] == {}


def test_report_gives_corpus_bleu_beside_rouge_and_meteor():
    answers = ["the cat sat on the mat", "a dog"]
    golds = [["the cat sat on a mat"], ["the dog"]]
    rows = narrativeqa_rows(answers, golds).assign(
        policy="packed", budget=160, **{"cfg.dataset.scorers": json.dumps(["bleu_rouge_meteor"])}
    )
    table = narrativeqa_table(rows, Layout(settings=("dataset", "budget"), policy=("packer",)), Options())
    assert table is not None
    record = table.data.iloc[0]
    assert record["bleu1_corpus"] == pytest.approx(0.75) and record["bleu4_corpus"] == pytest.approx(0.5)
    assert record["rougeL_mean"] == pytest.approx(rows["rougeL"].mean()) and record["n_rows"] == 2
    assert list(table.display.columns[-4:]) == ["BLEU-1 (corpus)", "BLEU-4 (corpus)", "ROUGE-L", "METEOR"]
    other = rows.assign(**{"cfg.dataset.scorers": json.dumps(["qasper_f1"])})
    assert narrativeqa_table(other, Layout(settings=("dataset",), policy=()), Options()) is None
