"""SQuAD-style (COVID-QA), ExpertQA, RAGBench, BEIR and DPR loaders: real samples, tiny files, broken input."""

from __future__ import annotations

import json
import logging
from collections import Counter
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from harness.data import DatasetFormatError, load_dataset, load_examples
from harness.data.squad import answer_span, split_passages

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"
COVIDQA = SHARED_DATA / "covidqa" / "200423_covidQA.json"
EXPERTQA = SHARED_DATA / "expertqa" / "expertqa_rand_test_sample.jsonl"


def _needs(path: Path):
    return pytest.mark.skipif(not path.is_file(), reason=f"shared sample {path} not present")


def _write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


# --------------------------------------------------------------------------------------------
# SQuAD-style / COVID-QA


def test_split_passages_packs_whole_sentences_up_to_the_word_cap():
    text = "One two three. Four five six seven. Eight nine.\nTen eleven twelve thirteen fourteen."
    passages = split_passages(text, max_words=5)
    # 3 words; +4 would make 7 > 5 -> new passage; 4 + 2 = 6 > 5 -> new; 2 + 5 = 7 > 5 -> new.
    assert [p.sentences for p in passages] == [
        ("One two three.",),
        ("Four five six seven.",),
        ("Eight nine.",),
        ("Ten eleven twelve thirteen fourteen.",),
    ]
    assert [text[p.start : p.end] for p in passages] == [s for p in passages for s in p.sentences]
    assert [p.sentences for p in split_passages(text, max_words=7)] == [
        ("One two three.", "Four five six seven."),
        ("Eight nine.", "Ten eleven twelve thirteen fourteen."),
    ]
    with pytest.raises(ValueError, match="passage_words"):
        split_passages(text, max_words=0)


def test_answer_span_snaps_to_the_nearest_occurrence():
    context = "flu A here. flu A there."
    assert answer_span(context, " flu A", 13) == (12, 17)  # off by one, leading space
    assert answer_span(context, "flu A", 1) == (0, 5)
    assert answer_span(context, "absent", 4) == (4, 10)


def _squad(tmp_path: Path, qas: list[dict], context: str) -> Path:
    path = tmp_path / "tiny_squad.json"
    path.write_text(
        json.dumps({"version": "v2.0", "data": [{"paragraphs": [{"context": context, "document_id": 7, "qas": qas}]}]}),
        encoding="utf-8",
    )
    return path


def test_squad_tiny_file_gold_passages(tmp_path):
    context = "Title line\n\nAlpha beta gamma. Delta epsilon zeta. Eta theta iota."
    start = context.index("Delta")
    qas = [
        {"id": 1, "question": "Which?", "answers": [{"text": " Delta epsilon", "answer_start": start + 1}]},
        {"id": 2, "question": "Both?", "answers": [{"text": "gamma. Delta", "answer_start": context.index("gamma")}]},
        {"id": 3, "question": "None?", "answers": [], "is_impossible": True},
    ]
    path = _squad(tmp_path, qas, context)
    examples = load_examples(path)  # auto-detected
    assert [e.question_id for e in examples] == ["1", "2", "3"]
    assert examples[0].documents is examples[1].documents  # one article, shared passages
    # 100-word cap: the whole (tiny) article is one passage.
    assert [d.doc_id for d in examples[0].documents] == ["7::0"]
    assert examples[0].documents[0].title == "Title line"

    from harness.data.squad import load_file

    examples = load_file(path, dataset="tiny", split="test", passage_words=3)
    ids = [d.doc_id for d in examples[0].documents]
    assert [d.sentences for d in examples[0].documents] == [
        ("Title line",),
        ("Alpha beta gamma.",),
        ("Delta epsilon zeta.",),
        ("Eta theta iota.",),
    ]
    assert examples[0].gold_doc_ids == (ids[2],)
    assert examples[0].answers == ("Delta epsilon",)
    assert examples[1].gold_doc_ids == (ids[1], ids[2])  # the span crosses a passage boundary
    assert examples[2].answers == () and examples[2].gold_doc_ids == ()
    assert examples[2].metadata["answerable"] is False


@pytest.mark.parametrize(
    ("qa", "field", "message"),
    [
        ({"id": 5, "answers": [{"text": "x", "answer_start": 0}]}, "paragraphs[0].qas[0].question", "missing field"),
        (
            {"id": 5, "question": "Q?", "answers": [{"text": "x", "answer_start": 999}]},
            "paragraphs[0].qas[0].answers[0]",
            "answer_start 999",
        ),
        ({"id": 5, "question": "Q?", "answers": []}, "paragraphs[0].qas[0].answers", "no answers"),
    ],
)
def test_squad_broken_records_name_file_record_and_field(tmp_path, qa, field, message):
    path = _squad(tmp_path, [qa], "Some context here.")
    with pytest.raises(DatasetFormatError, match=message) as info:
        load_examples(path, "squad")
    err = info.value
    assert (Path(err.path).name, err.index, err.record_id, err.field) == ("tiny_squad.json", 0, "5", field)


@_needs(COVIDQA)
def test_covidqa_sample():
    examples = load_dataset(str(COVIDQA), "squad", name="covidqa")
    raw = json.loads(COVIDQA.read_text(encoding="utf-8"))
    assert len(examples) == 1380
    assert len({e.question_id for e in examples}) == 1380
    assert len({e.metadata["document_id"] for e in examples}) == 98
    passages = {d.doc_id: d for e in examples for d in e.documents}
    for e in examples:
        assert e.gold_doc_ids and set(e.gold_doc_ids) <= {d.doc_id for d in e.documents}
        # Every reference answer lies inside the concatenated gold passages (whitespace normalised).
        gold_text = " ".join(passages[d].text for d in e.gold_doc_ids)
        assert " ".join(e.answers[0].split()) in gold_text
    assert all(len(d.text.split()) <= 100 or len(d.sentences) == 1 for d in passages.values())
    first = examples[0]
    assert first.question == raw["data"][0]["paragraphs"][0]["qas"][0]["question"]
    assert first.gold_doc_ids == ("630::0",)
    assert first.answers == (
        "Mother-to-child transmission (MTCT) is the main cause of HIV-1 infection in children worldwide.",
    )
    sampled = load_dataset(str(COVIDQA), "squad", sample_size=50, seed=3)
    assert len(sampled) == 50 and sampled == load_dataset(str(COVIDQA), sample_size=50, seed=3)


# --------------------------------------------------------------------------------------------
# ExpertQA


def _expert_record(evidence: list[str], answer: str = "Use X [1] and Y [2].") -> dict:
    return {
        "question": "How to do it?",
        "annotator_id": "a",
        "answers": {
            "sys": {
                "answer_string": answer,
                "revised_answer_string": "Use X [1].",
                "claims": [{"claim_string": "Use X [1].", "evidence": evidence}],
                "attribution": ["[1] http://a", "[2] http://b"],
            }
        },
        "metadata": {"field": "Engineering", "question_type": "Directed", "specific_field": "Civil"},
    }


def test_expertqa_tiny_file(tmp_path, caplog):
    rows = [
        _expert_record(["[1] http://a\n\nAlpha text. More alpha.", "[3] http://c\n\nGamma text.", "[2] http://b"]),
        _expert_record(["[1] http://a"]),  # bare URL only: skipped
    ]
    path = _write_jsonl(tmp_path / "expert.jsonl", rows)
    with caplog.at_level(logging.WARNING):
        examples = load_examples(path)
    assert "skipped 1 of 2 records" in caplog.text
    (e,) = examples
    assert e.question_id == "0" and e.qtype == "Engineering"
    assert [(d.doc_id, d.title, d.sentences) for d in e.documents] == [
        ("0::0", "http://a", ("Alpha text.", "More alpha.")),
        ("0::1", "http://c", ("Gamma text.",)),
    ]
    assert e.gold_doc_ids == ("0::0",)  # [3] is not cited by the answer string
    assert e.answers == ("Use X [1] and Y [2].", "Use X [1].")
    assert e.metadata["bare_url_evidence"] == 1


def test_expertqa_broken_evidence(tmp_path):
    path = _write_jsonl(
        tmp_path / "expert.jsonl", [_expert_record(["[1] http://a\n\nText."]), _expert_record(["no marker\n\nText."])]
    )
    with pytest.raises(DatasetFormatError, match="not an '\\[n\\] URL'") as info:
        load_examples(path, "expertqa")
    assert (info.value.index, info.value.field) == (1, "answers.sys.claims[0].evidence")


@_needs(EXPERTQA)
def test_expertqa_sample(caplog):
    with caplog.at_level(logging.WARNING):
        examples = load_examples(EXPERTQA)
    # 33 records cite bare URLs only; one cites no evidence at all: one counted line per reason.
    assert "skipped 33 of 100 records whose evidence is bare URLs only" in caplog.text
    assert "skipped 1 of 100 records without any evidence" in caplog.text
    assert len(examples) == 66
    raw = [json.loads(line) for line in EXPERTQA.read_text(encoding="utf-8").splitlines()]
    for e in examples:
        record = raw[int(e.question_id)]
        (system,) = record["answers"].values()
        assert e.question == record["question"].strip()
        assert e.answers[0] == system["answer_string"].strip()
        assert e.documents and set(e.gold_doc_ids) <= {d.doc_id for d in e.documents}
        # One document per distinct evidence text; its sentences re-join to that text.
        texts = {
            " ".join(ev.split("\n\n", 1)[1].split()) for c in system["claims"] for ev in c["evidence"] if "\n\n" in ev
        }
        assert {" ".join(d.text.split()) for d in e.documents} == texts
    # 329 numbered evidence texts, 9 of which repeat another number's URL and text.
    assert sum(len(e.documents) for e in examples) == 320


# --------------------------------------------------------------------------------------------
# RAGBench


def _ragbench_rows() -> list[dict]:
    return [
        {
            "id": "q0",
            "question": "What is A?",
            "documents": ["A is one. A is two.", "B is three."],
            "response": "A is one and two.",
            "documents_sentences": [[["0a", "A is one."], ["0b", "A is two."]], [["1a", "B is three."]]],
            "all_relevant_sentence_keys": ["0b"],
            "adherence_score": True,
            "relevance_score": 0.5,
        },
        {
            "id": "q1",
            "question": "What is B?",
            "documents": ["C.", "D.", "E."],
            "response": "B.",
            "documents_sentences": [[["0a", "C."]], [["1a", "D."]], [["2a", "E."], ["2b", "F."]]],
            "all_relevant_sentence_keys": ["2b", "0a", "2a"],
        },
    ]


def _check_ragbench(examples):
    first, second = examples
    assert first.question_id == "q0" and first.answers == ("A is one and two.",)
    assert [(d.doc_id, d.sentences) for d in first.documents] == [
        ("q0::0", ("A is one.", "A is two.")),
        ("q0::1", ("B is three.",)),
    ]
    assert first.gold_doc_ids == ("q0::0",)
    assert first.metadata["relevance_score"] == 0.5 and first.metadata["adherence_score"] is True
    assert second.gold_doc_ids == ("q1::0", "q1::2") and second.hops == 2


def test_ragbench_jsonl_and_parquet(tmp_path):
    rows = _ragbench_rows()
    _check_ragbench(load_examples(_write_jsonl(tmp_path / "test.jsonl", rows)))
    import pyarrow as pa
    import pyarrow.parquet as pq

    parquet = tmp_path / "test-00000-of-00001.parquet"
    pq.write_table(
        pa.Table.from_pylist([{k: v for k, v in r.items() if k != "adherence_score"} for r in rows]), parquet
    )
    examples = load_examples(parquet)  # auto: by suffix
    assert [e.gold_doc_ids for e in examples] == [("q0::0",), ("q1::0", "q1::2")]
    assert examples[0].documents[0].sentences == ("A is one.", "A is two.")


def test_ragbench_broken_key(tmp_path):
    rows = _ragbench_rows()
    rows[1]["all_relevant_sentence_keys"] = ["5a"]
    with pytest.raises(DatasetFormatError, match="names document 5") as info:
        load_examples(_write_jsonl(tmp_path / "test.jsonl", rows), "ragbench")
    assert (info.value.index, info.value.record_id, info.value.field) == (1, "q1", "all_relevant_sentence_keys")


# --------------------------------------------------------------------------------------------
# BEIR


def _beir(tmp_path: Path, qrels: str) -> Path:
    folder = tmp_path / "tinybeir"
    _write_jsonl(
        folder / "corpus.jsonl",
        [
            {"_id": "d1", "title": "One", "text": "First doc. It has two sentences."},
            {"_id": "d2", "title": "Two", "text": "Second doc."},
            {"_id": "d3", "title": "Title only", "text": ""},
        ],
    )
    _write_jsonl(
        folder / "queries.jsonl",
        [{"_id": "q1", "text": "first?"}, {"_id": "q2", "text": "second?"}, {"_id": "q3", "text": "unjudged"}],
    )
    (folder / "qrels").mkdir()
    (folder / "qrels" / "test.tsv").write_text(qrels, encoding="utf-8")
    return folder


def test_beir_tiny_folder(tmp_path):
    folder = _beir(tmp_path, "query-id\tcorpus-id\tscore\nq2\td2\t2\nq2\td1\t1\nq1\td1\t1\nq1\td3\t0\nq1\tgone\t1\n")
    examples = load_examples(folder)  # auto: a folder
    assert [e.question_id for e in examples] == ["q2", "q1"]  # qrels order; q3 has no judgements
    q2, q1 = examples
    assert q1.documents is q2.documents and [d.doc_id for d in q1.documents] == ["d1", "d2", "d3"]
    assert q1.documents[2].sentences == ("Title only",)
    assert q2.gold_doc_ids == ("d1", "d2")  # corpus order
    assert q1.gold_doc_ids == ("d1",)  # score 0 is not relevant; 'gone' is not in the corpus
    assert q1.metadata["qrels"] == {"d1": 1, "d3": 0, "gone": 1} and q1.metadata["missing_qrels"] == 1
    assert q2.answers == () and q2.dataset == "tinybeir" and q2.split == "test"
    assert len(load_dataset(str(folder), "beir", sample_size=1, seed=0)) == 1


def test_beir_broken_score(tmp_path):
    folder = _beir(tmp_path, "query-id\tcorpus-id\tscore\nq1\td1\t1\nq2\td2\thigh\n")
    with pytest.raises(DatasetFormatError, match="'high' is not an integer") as info:
        load_examples(folder, "beir")
    err = info.value
    assert (Path(err.path).name, err.index, err.record_id, err.field) == ("test.tsv", 1, "q2", "score")


def test_beir_broken_corpus_record(tmp_path):
    folder = _beir(tmp_path, "query-id\tcorpus-id\tscore\nq1\td1\t1\n")
    _write_jsonl(folder / "corpus.jsonl", [{"_id": "d1", "text": "ok"}, {"_id": "d2", "title": "no text"}])
    with pytest.raises(DatasetFormatError) as info:
        load_examples(folder)
    err = info.value
    assert (Path(err.path).name, err.index, err.record_id, err.field) == ("corpus.jsonl", 1, "d2", "text")


# --------------------------------------------------------------------------------------------
# DPR retrieval results


def _dpr_rows() -> list[dict]:
    return [
        {
            "question": "who wrote it",
            "answers": ["Ann", " Ann B. "],
            "ctxs": [
                {
                    "id": "11",
                    "title": "Book",
                    "text": "It was written by Ann. In 1900.",
                    "score": "80.5",
                    "has_answer": True,
                },
                {"id": "12", "title": "Other", "text": "Unrelated.", "score": "70.1", "has_answer": False},
            ],
        },
        {
            "question": "when",
            "answers": ["1900"],
            "ctxs": [
                {"id": "12", "title": "Other", "text": "Unrelated.", "score": 3, "has_answer": False},
            ],
        },
    ]


def test_dpr_tiny_file(tmp_path):
    path = tmp_path / "nq_test_results.json"
    path.write_text(json.dumps(_dpr_rows()), encoding="utf-8")
    first, second = load_examples(path)  # auto: a JSON list with ctxs
    assert first.question_id == "0" and first.answers == ("Ann", "Ann B.")
    assert [(d.doc_id, d.title, d.sentences) for d in first.documents] == [
        ("0::11", "Book", ("It was written by Ann.", "In 1900.")),
        ("0::12", "Other", ("Unrelated.",)),
    ]
    assert first.gold_doc_ids == ("0::11",) and second.gold_doc_ids == ()
    assert first.metadata["retriever_scores"] == (80.5, 70.1)
    assert (first.dataset, first.split) == ("nq_open", "test")


def test_dpr_broken_ctx(tmp_path):
    rows = _dpr_rows()
    del rows[1]["ctxs"][0]["text"]
    path = tmp_path / "nq.json"
    path.write_text(json.dumps(rows), encoding="utf-8")
    with pytest.raises(DatasetFormatError, match="'text'") as info:
        load_examples(path, "dpr")
    assert (info.value.index, info.value.record_id, info.value.field) == (1, None, "ctxs[0]")


# --------------------------------------------------------------------------------------------
# configs


@pytest.mark.parametrize(
    ("config", "layout"),
    [
        ("covidqa", "squad"),
        ("expertqa", "expertqa"),
        ("ragbench_covidqa", "ragbench"),
        ("ragbench_expertqa", "ragbench"),
        ("beir", "beir"),
        ("nq_open_dpr", "dpr"),
    ],
)
def test_configs_name_their_layout(config, layout):
    node = OmegaConf.load(REPO / "conf" / "dataset" / f"{config}.yaml")
    assert node["_target_"] == "harness.data.load_dataset" and node["layout"] == layout
    assert Counter(node.keys())["path"] == 1
