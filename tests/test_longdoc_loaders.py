"""Long-document loaders: QASPER, QuALITY and NarrativeQA on the shared samples and on tiny files."""

from __future__ import annotations

import csv
import json
from collections import Counter
from pathlib import Path

import pytest

from harness.data.errors import DatasetFormatError
from harness.data.narrativeqa import load_narrativeqa, story_paragraphs
from harness.data.qasper import load_qasper, read_json_objects
from harness.data.quality import load_quality
from harness.text.html import html_paragraphs

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"
QASPER_SAMPLE = SHARED / "qasper" / "qasper-original-sample.json"
QUALITY_SAMPLE = SHARED / "quality" / "quality_example.jsonl"


# ---------------------------------------------------------------------------------------------- QASPER


@pytest.mark.skipif(not QASPER_SAMPLE.is_file(), reason="shared QASPER sample not present")
def test_qasper_sample_gives_one_example_per_question_with_shared_chunks():
    examples = load_qasper(QASPER_SAMPLE, chunk_tokens=100)
    assert len(examples) == 51
    assert len({e.metadata["paper_id"] for e in examples}) == 10
    # First annotator's answer type (counted independently from the raw file when the loader was written).
    assert Counter(e.qtype for e in examples) == {"extractive": 26, "abstractive": 14, "unanswerable": 6, "yes_no": 5}
    first = examples[0]
    assert first.question == "What is the seed lexicon?"
    assert first.answers == (
        "a vocabulary of positive and negative predicates that helps determine the polarity score of an event",
        "seed lexicon consists of positive and negative predicates",
    )
    assert first.metadata["answer_types"] == ("abstractive", "extractive")
    by_paper: dict[str, list] = {}
    for e in examples:
        by_paper.setdefault(e.metadata["paper_id"], []).append(e)
        assert all(len(d.text.split()) <= 100 for d in e.documents)
        assert e.hops == len(e.gold_doc_ids)
    # Every question on a paper sees the very same chunks (the leaves every method shares).
    for questions in by_paper.values():
        assert all(q.documents == questions[0].documents for q in questions)


@pytest.mark.skipif(not QASPER_SAMPLE.is_file(), reason="shared QASPER sample not present")
def test_qasper_gold_chunks_hold_the_evidence_paragraphs():
    examples = load_qasper(QASPER_SAMPLE, chunk_tokens=100)
    paragraphs = {
        p for paper in read_json_objects(QASPER_SAMPLE) for sec in paper["full_text"]["paragraphs"] for p in sec
    }
    checked = 0
    for e in examples:
        gold_words = set(" ".join(e.document(d).text for d in e.gold_doc_ids).split())
        # Evidence that is not a paragraph of the text (a figure caption, a section name) has no chunk.
        for evidence in {x for ev in e.metadata["evidence"] for x in ev if x in paragraphs}:
            # Every word of an evidence paragraph lies in the gold chunks (a paragraph may span two).
            assert set(evidence.split()) <= gold_words
            checked += 1
        if not any(x in paragraphs for ev in e.metadata["evidence"] for x in ev):
            assert e.gold_doc_ids == ()
    assert checked > 50
    assert sum(1 for e in examples if not e.gold_doc_ids) == 8  # unanswerable, or evidence outside the text


def _tiny_paper(pid="p1"):
    return {
        "title": "A tiny paper",
        "abstract": "We study tiny things.",
        "full_text": [
            {
                "section_name": "Intro",
                "paragraphs": ["Tiny models are small. They run fast.", "We use a corpus of cats."],
            },
            {"section_name": "Results", "paragraphs": ["Accuracy rises to ninety percent on cats."]},
        ],
        "qas": [
            {
                "question": "What corpus is used?",
                "question_id": f"{pid}-q1",
                "answers": [
                    {
                        "answer": {
                            "unanswerable": False,
                            "extractive_spans": ["a corpus", "of cats"],
                            "yes_no": None,
                            "free_form_answer": "",
                            "evidence": ["We use a corpus of cats."],
                        }
                    },
                    {
                        "answer": {
                            "unanswerable": True,
                            "extractive_spans": [],
                            "yes_no": None,
                            "free_form_answer": "",
                            "evidence": [],
                        }
                    },
                ],
            },
            {
                "question": "Do models run fast?",
                "question_id": f"{pid}-q2",
                "answers": [
                    {
                        "answer": {
                            "unanswerable": False,
                            "extractive_spans": [],
                            "yes_no": True,
                            "free_form_answer": "",
                            "evidence": ["Tiny models are small. They run fast."],
                        }
                    },
                ],
            },
            {
                "question": "What is the accuracy?",
                "question_id": f"{pid}-q3",
                "answers": [
                    {
                        "answer": {
                            "unanswerable": False,
                            "extractive_spans": [],
                            "yes_no": False,
                            "free_form_answer": "",
                            "evidence": ["Accuracy rises to ninety percent on cats."],
                        }
                    },
                ],
            },
        ],
    }


def test_qasper_official_layout_answers_types_and_gold_chunks(tmp_path):
    path = tmp_path / "qasper-dev-v0.3.json"
    path.write_text(json.dumps({"p1": _tiny_paper()}))
    examples = load_qasper(path, chunk_tokens=6)
    # 4 + 3 words > 6: two chunks; 3 + 6 > 6: the 6-word sentence alone; the 7-word sentence is longer
    # than a chunk and is cut at words into 6 + 1.
    assert [d.sentences for d in examples[0].documents] == [
        ("Tiny models are small.",),
        ("They run fast.",),
        ("We use a corpus of cats.",),
        ("Accuracy rises to ninety percent on",),
        ("cats.",),
    ]
    q1, q2, q3 = examples
    assert q1.answers == ("a corpus, of cats", "Unanswerable")
    assert q1.metadata["answer_types"] == ("extractive", "unanswerable") and q1.qtype == "extractive"
    assert q1.gold_doc_ids == ("p1::chunk002",) and q1.hops == 1
    assert q2.answers == ("Yes",) and q2.qtype == "yes_no"
    assert q2.gold_doc_ids == ("p1::chunk000", "p1::chunk001")
    assert q3.answers == ("No",) and q3.gold_doc_ids == ("p1::chunk003", "p1::chunk004") and q3.hops == 2
    assert q1.split == "dev" and q1.dataset == "qasper"
    assert q1.documents[0].title == "Intro" and q1.documents[3].title == "Results"
    with_abstract = load_qasper(path, chunk_tokens=6, include_abstract=True)
    assert with_abstract[0].documents[0].text == "We study tiny things."
    only = load_qasper(path, chunk_tokens=6, answer_types=["yes_no"])
    assert [e.question_id for e in only] == ["p1-q2", "p1-q3"]
    assert [e.question_id for e in load_qasper(path, chunk_tokens=6, sample_size=1, seed=0)] == ["p1-q3"]


def test_qasper_columnar_concatenated_layout_matches_the_record_layout(tmp_path):
    paper = _tiny_paper()
    columnar = {
        "id": "p1",
        "title": paper["title"],
        "abstract": paper["abstract"],
        "full_text": {
            "section_name": [s["section_name"] for s in paper["full_text"]],
            "paragraphs": [s["paragraphs"] for s in paper["full_text"]],
        },
        "qas": {
            "question": [q["question"] for q in paper["qas"]],
            "question_id": [q["question_id"] for q in paper["qas"]],
            "answers": [
                {
                    "answer": [a["answer"] for a in q["answers"]],
                    "annotation_id": [f"a{i}" for i, _ in enumerate(q["answers"])],
                }
                for q in paper["qas"]
            ],
        },
    }
    other = dict(columnar, id="p2", qas=dict(columnar["qas"], question_id=["p2-q1", "p2-q2", "p2-q3"]))
    path = tmp_path / "papers.json"
    path.write_text(json.dumps(columnar, indent=1) + "\n" + json.dumps(other))
    official = tmp_path / "official.json"
    official.write_text(json.dumps({"p1": paper}))
    a = load_qasper(path, chunk_tokens=6)
    b = load_qasper(official, chunk_tokens=6)
    assert len(a) == 6
    assert [(e.question, e.answers, e.gold_doc_ids) for e in a[:3]] == [
        (e.question, e.answers, e.gold_doc_ids) for e in b
    ]


def test_qasper_errors_name_file_record_and_field(tmp_path):
    paper = _tiny_paper()
    del paper["full_text"]
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({"p1": paper}))
    with pytest.raises(DatasetFormatError, match=r"bad.json: record 0 \(id 'p1'\): field 'full_text': missing"):
        load_qasper(path)
    paper = _tiny_paper()
    paper["qas"][0]["answers"][0]["answer"].update(extractive_spans=[], unanswerable=False)
    path.write_text(json.dumps({"p1": paper}))
    with pytest.raises(DatasetFormatError, match="field 'qas.answers'.*no answer"):
        load_qasper(path)
    path.write_text("{not json")
    with pytest.raises(DatasetFormatError, match=r"record 0: invalid or truncated JSON at char 1 \(line 1, column 2\)"):
        load_qasper(path)
    with pytest.raises(ValueError, match="answer_types"):
        load_qasper(tmp_path / "bad.json", answer_types=["boolean"])


# --------------------------------------------------------------------------------------------- QuALITY


@pytest.mark.skipif(not QUALITY_SAMPLE.is_file(), reason="shared QuALITY sample not present")
def test_quality_sample_prerelease_layout():
    examples = load_quality(QUALITY_SAMPLE, chunk_tokens=300)
    # The file holds one record twice: its five questions are read once.
    assert [e.question_id for e in examples] == [f"52845_YLZPNNYD_q{i}" for i in range(1, 6)]
    assert [e.answers[1] for e in examples] == ["B", "C", "D", "A", "D"]
    # Hard: most timed annotators wrong, untimed right (q5: 3 of 5 timed answers were right).
    assert [e.metadata["hard"] for e in examples] == [True, True, True, True, False]
    first = examples[0]
    assert first.question.splitlines()[0] == first.metadata["bare_question"]
    assert first.question.splitlines()[2].startswith("(B) Because Deirdre has fallen in love")
    assert first.answers[0] == first.metadata["options"][1]
    assert first.documents[0].text.startswith("THE GIRL IN HIS MIND By ROBERT F. YOUNG")
    assert all(len(d.text.split()) <= 300 for d in first.documents)
    assert "<p>" not in " ".join(d.text for d in first.documents)


def test_quality_release_layout_difficult_flag_and_unlabelled_questions(tmp_path):
    record = {
        "article_id": "1",
        "set_unique_id": "1_A",
        "title": "T",
        "article": "<html><body><p>First para\nline two.</p><p>Second <i>para</i>.</p></body></html>",
        "questions": [
            {
                "question": "Which?",
                "question_unique_id": "1_A_1",
                "options": ["w", "x", "y", "z"],
                "gold_label": 3,
                "difficult": 1,
            },
            {
                "question": "What?",
                "question_unique_id": "1_A_2",
                "options": ["w", "x", "y", "z"],
                "gold_label": 1,
                "difficult": 0,
            },
            {"question": "Hidden?", "question_unique_id": "1_A_3", "options": ["w", "x", "y", "z"]},
        ],
    }
    path = tmp_path / "QuALITY.v1.0.1.htmlstripped.dev"
    path.write_text(json.dumps(record) + "\n")
    examples = load_quality(path, options_in_question=False)
    assert [(e.question, e.answers, e.metadata["hard"], e.qtype) for e in examples] == [
        ("Which?", ("y", "C"), True, "hard"),
        ("What?", ("w", "A"), False, "easy"),
    ]
    assert examples[0].documents[0].sentences == ("First para line two.", "Second para.")
    assert [e.question_id for e in load_quality(path, hard_only=True)] == ["1_A_1"]
    record["questions"][0]["gold_label"] = 5
    path.write_text(json.dumps(record) + "\n")
    with pytest.raises(DatasetFormatError, match="gold_label 5 is not 1..4"):
        load_quality(path)


def test_html_paragraphs_split_blocks_and_double_breaks():
    html = "<h1>Title</h1><p>One\n two<br/>three</p><p>Four<br/><br/>Five</p><script>x=1</script><p> </p>"
    assert html_paragraphs(html) == ["Title", "One two three", "Four", "Five"]


# ----------------------------------------------------------------------------------------- NarrativeQA


def _write_csv(path: Path, header, rows):
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(header)
        writer.writerows(rows)


@pytest.fixture()
def narrativeqa_root(tmp_path):
    qaps_header = [
        "document_id",
        "set",
        "question",
        "answer1",
        "answer2",
        "question_tokenized",
        "answer1_tokenized",
        "answer2_tokenized",
    ]
    _write_csv(
        tmp_path / "qaps.csv",
        qaps_header,
        [
            ["d1", "test", "Who finds the map?", "Ann", "Ann the sailor", "", "", ""],
            ["d2", "test", "Where does Bob go?", "To the moon.", "the moon", "", "", ""],
            ["d1", "train", "Why?", "Because.", "Because", "", "", ""],
        ],
    )
    _write_csv(
        tmp_path / "documents.csv",
        [
            "document_id",
            "set",
            "kind",
            "story_url",
            "story_file_size",
            "wiki_url",
            "wiki_title",
            "story_word_count",
            "story_start",
            "story_end",
        ],
        [
            ["d1", "test", "gutenberg", "", "", "", "", "", "CHAPTER I", "THE END"],
            ["d2", "test", "movie", "", "", "", "", "", "FADE IN", "FADE OUT"],
        ],
    )
    _write_csv(
        tmp_path / "third_party" / "wikipedia" / "summaries.csv",
        ["document_id", "set", "summary", "summary_tokenized"],
        [
            ["d1", "test", "Ann finds a map. She sails away.", ""],
            ["d2", "test", "Bob flies to the moon.  He returns.", ""],
        ],
    )
    (tmp_path / "tmp").mkdir()
    (tmp_path / "tmp" / "d1.content").write_text(
        "Project Gutenberg header\n\nCHAPTER I\n\nAnn walked to the harbour.\nShe found a map.\n\n"
        "The ship left at dawn.\n\nTHE END\n\nLicense text",
        encoding="utf-8",
    )
    (tmp_path / "tmp" / "d2.content").write_text(
        "<html><body><pre>Site menu</pre><p>FADE IN</p><p>Bob boards the rocket.</p>"
        "<p>It flies to the moon.</p><p>FADE OUT</p><p>footer</p></body></html>",
        encoding="utf-8",
    )
    return tmp_path


def test_narrativeqa_summaries(narrativeqa_root):
    examples = load_narrativeqa(narrativeqa_root, split="test", context="summaries", chunk_tokens=5)
    assert [e.question for e in examples] == ["Who finds the map?", "Where does Bob go?"]
    assert examples[0].answers == ("Ann", "Ann the sailor")
    assert [d.sentences for d in examples[0].documents] == [("Ann finds a map.",), ("She sails away.",)]
    assert examples[0].gold_doc_ids == () and examples[0].metadata["context"] == "summaries"
    assert examples[1].documents[0].doc_id == "d2::chunk000"
    assert [e.question for e in load_narrativeqa(narrativeqa_root, split="train")] == ["Why?"]


def test_narrativeqa_stories_are_cut_to_their_markers_and_stripped(narrativeqa_root):
    examples = load_narrativeqa(narrativeqa_root, context="stories", chunk_tokens=50)
    d1 = " ".join(d.text for d in examples[0].documents)
    assert d1 == "CHAPTER I Ann walked to the harbour. She found a map. The ship left at dawn. THE END"
    d2 = " ".join(d.text for d in examples[1].documents)
    assert d2 == "FADE IN Bob boards the rocket. It flies to the moon. FADE OUT"
    assert examples[1].qtype == "movie"
    assert story_paragraphs("a\n\nb", "x", "y") == ["a", "b"]  # markers not found: the whole text


def test_narrativeqa_errors(narrativeqa_root):
    (narrativeqa_root / "tmp" / "d2.content").unlink()
    with pytest.raises(FileNotFoundError, match="d2"):
        load_narrativeqa(narrativeqa_root, context="stories")
    _write_csv(narrativeqa_root / "qaps.csv", ["document_id", "set", "question"], [["d1", "test", "Q?"]])
    with pytest.raises(DatasetFormatError, match=r"qaps.csv: field 'answer1': missing columns"):
        load_narrativeqa(narrativeqa_root)
    with pytest.raises(ValueError, match="split"):
        load_narrativeqa(narrativeqa_root, split="dev")


# ------------------------------------------------------------------------------------------- subsample

# Question ids each loader drew before the loaders shared one subsample(): a rerun of an older config
# must read the same questions.
QASPER_DRAWN = {
    0: [
        "bb97537a0a7c8f12a3f65eba73cefa6abcd2f2b2",
        "edb2d24d6d10af13931b3a47a6543bd469752f0c",
        "14323046220b2aea8f15fba86819cbccc389ed8b",
        "dd155f01f6f4a14f9d25afc97504aefdc6d29c13",
        "6e2ad9ad88cceabb6977222f5e090ece36aa84ea",
    ],
    13: [
        "44c4bd6decc86f1091b5fc0728873d9324cdde4e",
        "aacb0b97aed6fc6a8b471b8c2e5c4ddb60988bf5",
        "710c1f8d4c137c8dad9972f5ceacdbf8004db208",
        "47726be8641e1b864f17f85db9644ce676861576",
        "99a10823623f78dbff9ccecb210f187105a196e9",
    ],
}
QUALITY_DRAWN = {0: ["52845_YLZPNNYD_q4", "52845_YLZPNNYD_q5"], 1: ["52845_YLZPNNYD_q2", "52845_YLZPNNYD_q3"]}
NARRATIVEQA_DRAWN = {0: ["d2::q5", "d1::q7", "d0::q9", "d1::q10"], 7: ["d0::q9", "d1::q10", "d2::q11", "d2::q14"]}


@pytest.mark.skipif(not QASPER_SAMPLE.is_file(), reason="shared QASPER sample not present")
@pytest.mark.parametrize("seed", sorted(QASPER_DRAWN))
def test_qasper_draws_the_same_questions_as_before(seed):
    assert [e.question_id for e in load_qasper(QASPER_SAMPLE, sample_size=5, seed=seed)] == QASPER_DRAWN[seed]


@pytest.mark.skipif(not QUALITY_SAMPLE.is_file(), reason="shared QuALITY sample not present")
@pytest.mark.parametrize("seed", sorted(QUALITY_DRAWN))
def test_quality_draws_the_same_questions_as_before(seed):
    assert [e.question_id for e in load_quality(QUALITY_SAMPLE, sample_size=2, seed=seed)] == QUALITY_DRAWN[seed]
    assert len(load_quality(QUALITY_SAMPLE, sample_size=50, seed=seed)) == 5  # more than there are: all


@pytest.mark.parametrize("seed", sorted(NARRATIVEQA_DRAWN))
def test_narrativeqa_draws_the_same_questions_as_before(tmp_path, seed):
    # 16 questions over three summaries, every fourth in the train split: 12 test questions.
    _write_csv(
        tmp_path / "qaps.csv",
        ["document_id", "set", "question", "answer1", "answer2"],
        [[f"d{i % 3}", "test" if i % 4 else "train", f"Question {i}?", f"a{i}", ""] for i in range(16)],
    )
    _write_csv(
        tmp_path / "third_party" / "wikipedia" / "summaries.csv",
        ["document_id", "summary"],
        [[f"d{i}", f"Summary {i}."] for i in range(3)],
    )
    assert len(load_narrativeqa(tmp_path)) == 12
    assert [e.question_id for e in load_narrativeqa(tmp_path, sample_size=4, seed=seed)] == NARRATIVEQA_DRAWN[seed]


@pytest.mark.parametrize("bad", [0, -3, 2.5, True])
def test_a_bad_sample_size_fails_before_any_file_is_read(tmp_path, bad):
    missing = tmp_path / "absent.json"  # a size check after reading would report the missing file instead
    for load in (load_qasper, load_quality, load_narrativeqa):
        with pytest.raises(ValueError, match="sample_size"):
            load(missing, sample_size=bad)
