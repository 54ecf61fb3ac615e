"""Every loader, every kind of malformed input: a DatasetFormatError naming file, record and field.

Each loader gets a minimal valid dataset (two records, built here), which one case at a time is
broken: truncated, a required field removed, an empty context, a repeated id, a non-UTF-8 byte,
an empty file, a directory where the file should be, and a missing path. Record-level cases break
the second record (index 1), so the expected index is worked out from the file itself.
"""

from __future__ import annotations

import copy
import csv
import io
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from harness.data import DatasetFormatError, load_examples, squad
from harness.data.errors import DatasetNotFoundError
from harness.data.narrativeqa import load_narrativeqa
from harness.data.qasper import load_qasper
from harness.data.quality import load_quality

CASES = (
    "truncated",
    "missing_field",
    "empty_context",
    "duplicate_id",
    "non_utf8",
    "empty_file",
    "directory",
    "missing_path",
)


def _jsonl(rows: list[dict]) -> str:
    return "".join(json.dumps(r) + "\n" for r in rows)


def _csv(header: list[str], rows: list[list[str]]) -> str:
    out = io.StringIO(newline="")
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(rows)
    return out.getvalue()


# ------------------------------------------------------------------------------------------ records


def _hotpot(qid: str) -> dict:
    return {
        "_id": qid,
        "question": f"Question {qid}?",
        "answer": "X",
        "type": "bridge",
        "level": "easy",
        "supporting_facts": [["A", 0], ["B", 0]],
        "context": [["A", ["A is X."]], ["B", ["B is Z."]], ["C", ["C."]]],
    }


def _twowiki(qid: str) -> dict:
    return {**_hotpot(qid), "type": "comparison", "evidences": [["A", "p", "B"]]}


def _musique(qid: str) -> dict:
    return {
        "id": qid,
        "question": f"Question {qid}?",
        "answer": "Lee",
        "answer_aliases": [],
        "answerable": True,
        "question_decomposition": [{"question": "a", "answer": "b"}],
        "paragraphs": [
            {"idx": i, "title": f"T{i}", "paragraph_text": f"Paragraph {i}.", "is_supporting": i == 0} for i in range(2)
        ],
    }


def _ircot(qid: str) -> dict:
    return {
        "question_id": qid,
        "question_text": f"Question {qid}?",
        "answers_objects": [{"number": "", "date": {"day": "", "month": "", "year": ""}, "spans": ["Lee"]}],
        "contexts": [
            {"id": str(i), "title": f"T{i}", "paragraph_text": f"Paragraph {i}.", "is_supporting": i == 0}
            for i in range(2)
        ],
    }


def _expert(question: str, evidence: list[str] | None = None) -> dict:
    evidence = ["[1] http://a\n\nAlpha text."] if evidence is None else evidence
    return {
        "question": question,
        "annotator_id": "a",
        "metadata": {"field": "Engineering"},
        "answers": {
            "sys": {"answer_string": "Use X [1].", "claims": [{"claim_string": "X [1].", "evidence": evidence}]}
        },
    }


def _ragbench(qid: str) -> dict:
    return {
        "id": qid,
        "question": f"What is {qid}?",
        "response": "It is A.",
        "documents_sentences": [[["0a", "A is one."]], [["1a", "B is two."]]],
        "all_relevant_sentence_keys": ["0a"],
    }


def _dpr(qid: str) -> dict:
    return {
        "id": qid,
        "question": f"who is {qid}",
        "answers": ["Ann"],
        "ctxs": [{"id": "11", "title": "Book", "text": "Ann wrote it.", "score": "1.5", "has_answer": True}],
    }


def _squad_article(qid: str, document_id: int) -> dict:
    context = "Title line\nAlpha beta gamma. Delta epsilon."
    return {
        "paragraphs": [
            {
                "context": context,
                "document_id": document_id,
                "qas": [
                    {
                        "id": qid,
                        "question": f"Which {qid}?",
                        "answers": [{"text": "Delta", "answer_start": context.index("Delta")}],
                    }
                ],
            }
        ]
    }


def _paper(pid: str) -> dict:
    return {
        "title": f"Paper {pid}",
        "abstract": "About cats.",
        "full_text": [{"section_name": "Intro", "paragraphs": ["Cats are small. They purr."]}],
        "qas": [
            {
                "question": "Do cats purr?",
                "question_id": f"{pid}-q1",
                "answers": [
                    {
                        "answer": {
                            "unanswerable": False,
                            "extractive_spans": [],
                            "yes_no": True,
                            "free_form_answer": "",
                            "evidence": ["Cats are small. They purr."],
                        }
                    }
                ],
            }
        ],
    }


def _quality(uid: str) -> dict:
    return {
        "article_id": uid,
        "unique_id": uid,
        "title": f"Title {uid}",
        "article": ["<p>Deirdre sails.</p>", "<p>She lands.</p>"],
        "question1": "Who sails?",
        "question1option1": "Ann",
        "question1option2": "Deirdre",
        "question1_gold_label": 2,
        "question2": "Where?",
        "question2option1": "Home",
        "question2option2": "Away",
        "question2_gold_label": 1,
    }


# --------------------------------------------------------------------------------------------- specs


@dataclass
class Spec:
    """How to write a loader's dataset, break it, and load it."""

    records: Callable[[], Any]  # the valid data the target file is written from
    dump: Callable[[Any], str]  # data -> the target file's text
    target: str  # the file (relative to the dataset folder) every generic case breaks
    load: Callable[[Path], Any]  # loads the dataset from its folder
    marker: str  # occurs only in the second record of the target file: a bad byte is planted in it
    extra: Callable[[Path], None] = lambda folder: None  # writes any other files of the dataset
    # case -> breaks (data, folder) in place; returns (index, record id, field) the error must name,
    # plus, when the case breaks another file of the dataset, that file
    broken: dict[str, Callable[[Any, Path], tuple]] | None = None
    record_of_second: int | None = 1  # the record a bad byte in the second record is reported in


def _list_spec(make, layout, id_field, missing, empty, marker, name="data.jsonl", dump=_jsonl) -> Spec:
    def broken_missing(rows, folder):
        rows[1].pop(missing)
        return 1, rows[1][id_field], missing

    def broken_empty(rows, folder):
        rows[1][empty] = []
        return 1, rows[1][id_field], empty

    def broken_duplicate(rows, folder):
        rows[1][id_field] = rows[0][id_field]
        return 1, rows[0][id_field], id_field

    return Spec(
        records=lambda: [make("q0"), make("q1")],
        dump=dump,
        target=name,
        marker=marker,
        load=lambda folder: load_examples(folder / name, layout),
        broken={"missing_field": broken_missing, "empty_context": broken_empty, "duplicate_id": broken_duplicate},
    )


def _expert_spec() -> Spec:
    def missing(rows, folder):
        del rows[1]["question"]
        return 1, None, "question"

    def empty(rows, folder):
        for row in rows:
            row["answers"]["sys"]["claims"][0]["evidence"] = []
        return None, None, None  # nothing left to load: the file is named, with the count per reason

    def duplicate(rows, folder):
        rows[1] = copy.deepcopy(rows[0])
        return 1, None, "question"

    return Spec(
        records=lambda: [_expert("How to do A?"), _expert("How to do B?")],
        dump=_jsonl,
        target="expert.jsonl",
        marker="How to do B",
        load=lambda folder: load_examples(folder / "expert.jsonl", "expertqa"),
        broken={"missing_field": missing, "empty_context": empty, "duplicate_id": duplicate},
    )


def _squad_spec() -> Spec:
    def missing(top, folder):
        del top["data"][1]["paragraphs"][0]["qas"][0]["question"]
        return 1, "q1", "paragraphs[0].qas[0].question"

    def empty(top, folder):
        top["data"][1]["paragraphs"][0]["context"] = "  "
        return 1, None, "paragraphs[0].context"

    def duplicate(top, folder):
        top["data"][1]["paragraphs"][0]["qas"][0]["id"] = "q0"
        return 1, "q0", "paragraphs[0].qas[0].id"

    return Spec(
        records=lambda: {"version": "v2.0", "data": [_squad_article("q0", 1), _squad_article("q1", 2)]},
        dump=json.dumps,
        target="covid.json",
        marker="Which q1",
        load=lambda folder: load_examples(folder / "covid.json", "squad"),
        broken={"missing_field": missing, "empty_context": empty, "duplicate_id": duplicate},
    )


def _beir_spec() -> Spec:
    def extra(folder):
        (folder / "queries.jsonl").write_text(_jsonl([{"_id": "u1", "text": "first?"}]), encoding="utf-8")
        (folder / "qrels").mkdir()
        (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nu1\td0\t1\n", encoding="utf-8")

    def missing(rows, folder):
        del rows[1]["text"]
        return 1, "d1", "text"

    def empty(rows, folder):
        rows[1].update(text=" ", title="")
        return 1, "d1", "text"

    def duplicate(rows, folder):
        rows[1]["_id"] = "d0"
        return 1, "d0", "_id"

    return Spec(
        records=lambda: [
            {"_id": "d0", "title": "Zero", "text": "Doc zero."},
            {"_id": "d1", "title": "One", "text": "Doc one."},
        ],
        dump=_jsonl,
        target="corpus.jsonl",
        marker="Doc one",
        load=lambda folder: load_examples(folder, "beir"),
        extra=extra,
        broken={"missing_field": missing, "empty_context": empty, "duplicate_id": duplicate},
    )


def _qasper_spec() -> Spec:
    def missing(papers, folder):
        del papers["p1"]["qas"]
        return 1, "p1", "qas"

    def empty(papers, folder):
        papers["p1"]["full_text"] = []
        return 1, "p1", "full_text"

    def duplicate(papers, folder):
        papers["p1"]["qas"][0]["question_id"] = "p0-q1"
        return 1, "p1", "qas"

    return Spec(
        records=lambda: {"p0": _paper("p0"), "p1": _paper("p1")},
        dump=json.dumps,
        target="qasper.json",
        marker="Paper p1",
        load=lambda folder: load_qasper(folder / "qasper.json"),
        broken={"missing_field": missing, "empty_context": empty, "duplicate_id": duplicate},
        record_of_second=1,  # the paper (member of the one JSON object) the bad byte falls in
    )


def _quality_spec() -> Spec:
    def missing(rows, folder):
        del rows[1]["question2"]  # its options and label stay: the question must not vanish
        return 1, "r1", "question2"

    def empty(rows, folder):
        rows[1]["article"] = []
        return 1, "r1", "article"

    def duplicate(rows, folder):
        rows[1]["unique_id"] = "r0"  # same question ids, different question text
        rows[1]["question1"] = "Who lands?"
        return 1, "r0", "question1"

    return Spec(
        records=lambda: [_quality("r0"), _quality("r1")],
        dump=_jsonl,
        target="quality.jsonl",
        marker="Title r1",
        load=lambda folder: load_quality(folder / "quality.jsonl"),
        broken={"missing_field": missing, "empty_context": empty, "duplicate_id": duplicate},
    )


_QAPS = ["document_id", "set", "question", "answer1", "answer2"]
_SUMMARIES = ["document_id", "set", "summary"]
_SUMMARIES_FILE = "third_party/wikipedia/summaries.csv"


def _narrativeqa_spec() -> Spec:
    def write_summaries(folder, rows):
        path = folder / _SUMMARIES_FILE
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(_csv(_SUMMARIES, rows), encoding="utf-8")

    summaries = [["d0", "test", "Ann finds a map."], ["d1", "test", "Bob flies."]]

    def missing(qaps, folder):
        qaps["header"].remove("answer1")
        for row in qaps["rows"]:
            del row[3]
        return None, None, "answer1"

    def empty(qaps, folder):
        write_summaries(folder, [summaries[0], ["d1", "test", "  "]])
        return 1, "d1", "summary", _SUMMARIES_FILE

    def duplicate(qaps, folder):
        write_summaries(folder, [summaries[0], ["d0", "test", "Another summary."], summaries[1]])
        return 1, "d0", "document_id", _SUMMARIES_FILE

    return Spec(
        records=lambda: {
            "header": list(_QAPS),
            "rows": [["d0", "test", "Who finds it?", "Ann", "Ann B"], ["d1", "test", "Who flies?", "Bob", "Bob C"]],
        },
        dump=lambda qaps: _csv(qaps["header"], qaps["rows"]),
        target="qaps.csv",
        marker="Who flies",
        load=lambda folder: load_narrativeqa(folder, split="test"),
        extra=lambda folder: write_summaries(folder, summaries),
        broken={"missing_field": missing, "empty_context": empty, "duplicate_id": duplicate},
    )


SPECS: dict[str, Callable[[], Spec]] = {
    "hotpotqa": lambda: _list_spec(
        _hotpot, "hotpotqa", "_id", "question", "context", "Question q1", name="hotpot.json", dump=json.dumps
    ),
    "musique": lambda: _list_spec(_musique, "musique", "id", "answer", "paragraphs", "Question q1"),
    "2wiki": lambda: _list_spec(_twowiki, "2wiki", "_id", "supporting_facts", "context", "Question q1"),
    "ircot": lambda: _list_spec(_ircot, "ircot", "question_id", "question_text", "contexts", "Question q1"),
    "ragbench": lambda: _list_spec(_ragbench, "ragbench", "id", "response", "documents_sentences", "What is q1"),
    "dpr": lambda: _list_spec(_dpr, "dpr", "id", "question", "ctxs", "who is q1", name="dpr.json", dump=json.dumps),
    "squad": _squad_spec,
    "expertqa": _expert_spec,
    "beir": _beir_spec,
    "qasper": _qasper_spec,
    "quality": _quality_spec,
    "narrativeqa": _narrativeqa_spec,
}


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("loader", list(SPECS))
def test_malformed_input_names_file_record_and_field(tmp_path, loader, case):
    spec = SPECS[loader]()
    folder = tmp_path / "dataset"
    folder.mkdir()
    spec.extra(folder)
    target = folder / spec.target
    data = spec.records()
    expected = None
    if case in ("missing_field", "empty_context", "duplicate_id"):
        expected = spec.broken[case](data, folder)
    text = spec.dump(data)
    raw = text.encode("utf-8")
    bad_offset = None
    if case == "truncated":
        body = raw.rstrip()
        raw = body[: len(body) - 12]  # cut inside the last record
    elif case == "non_utf8":
        marker = spec.marker.encode()
        assert raw.count(marker) == 1
        bad_offset = raw.index(marker) + 2
        raw = raw[:bad_offset] + b"\xff" + raw[bad_offset:]
    elif case == "empty_file":
        raw = b""
    target.write_bytes(raw)
    if case == "directory":
        target.unlink()
        target.mkdir()
    elif case == "missing_path":
        target.unlink()

    if expected is not None and len(expected) == 4:
        target = folder / expected[3]

    with pytest.raises(DatasetFormatError) as info:
        spec.load(folder)
    err = info.value
    message = str(err)
    assert err.path == str(target), message
    assert message.startswith(f"{target}: ")
    assert len(message) < 400  # never the file's content
    if expected is not None:
        assert (err.index, err.record_id, err.field) == expected[:3], message
    elif case == "truncated":
        assert "truncated" in message and err.__cause__ is None
        if spec.target.endswith(".csv"):
            assert (err.index, err.field) == (1, "answer1"), message
        elif loader != "qasper":  # one JSON object holds every paper
            assert err.index == 1, message
    elif case == "non_utf8":
        assert f"byte 0xff at byte offset {bad_offset}" in message
        assert err.index == spec.record_of_second, message
        # Neither cause nor context: the decode error's repr would carry the whole file.
        assert err.__cause__ is None and err.__suppress_context__
    elif case == "empty_file":
        assert "empty" in message
    elif case == "directory":
        assert "is a directory" in message
    elif case == "missing_path":
        assert isinstance(err, DatasetNotFoundError) and isinstance(err, FileNotFoundError)
        assert "not found" in message


def test_expertqa_skips_by_design_are_counted_once_per_reason(tmp_path, caplog):
    rows = [
        _expert("Q0?"),
        {**_expert("Q1?"), "answers": {}},
        _expert("Q2?", evidence=["[1] http://a"]),
        _expert("Q3?", evidence=[]),
        {**_expert("Q4?"), "answers": {}},
        _expert("Q5?"),
    ]
    path = tmp_path / "expert.jsonl"
    path.write_text(_jsonl(rows), encoding="utf-8")
    with caplog.at_level(logging.WARNING, logger="harness.data"):
        examples = load_examples(path)
    assert [e.question for e in examples] == ["Q0?", "Q5?"]
    assert [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING] == [
        f"skipped 2 of 6 records without any system answer in {path}",
        f"skipped 1 of 6 records whose evidence is bare URLs only in {path}",
        f"skipped 1 of 6 records without any evidence in {path}",
    ]


def test_squad_duplicate_question_id_is_an_error_not_a_lost_question(tmp_path):
    top = {"data": [_squad_article("q0", 1), _squad_article("q1", 2)]}
    top["data"][1]["paragraphs"][0]["qas"].append(
        {"id": "q0", "question": "Other?", "answers": [{"text": "Alpha", "answer_start": 11}]}
    )
    path = tmp_path / "covid.json"
    path.write_text(json.dumps(top), encoding="utf-8")
    with pytest.raises(DatasetFormatError) as info:
        load_examples(path)
    assert str(info.value) == (
        f"{path}: record 1 (id 'q0'): field 'paragraphs[0].qas[1].id': "
        "duplicate question id (first at record 0, paragraphs[0].qas[0])"
    )


def test_quality_verbatim_repeat_is_a_counted_skip(tmp_path, caplog):
    path = tmp_path / "quality.jsonl"
    path.write_text(_jsonl([_quality("r0"), _quality("r1"), _quality("r0")]), encoding="utf-8")
    with caplog.at_level(logging.WARNING, logger="harness.data"):
        examples = load_quality(path)
    assert [e.question_id for e in examples] == ["r0_q1", "r0_q2", "r1_q1", "r1_q2"]
    assert f"skipped 2 of 6 questions that repeat an earlier record verbatim in {path}" in caplog.text


def test_qasper_repeated_paper_key_is_an_error(tmp_path):
    path = tmp_path / "qasper.json"
    paper = json.dumps(_paper("p0"))
    path.write_text('{"p0": ' + paper + ', "p0": ' + paper + "}", encoding="utf-8")
    with pytest.raises(DatasetFormatError, match="key 'p0' repeats in one JSON object") as info:
        load_qasper(path)
    assert (info.value.path, info.value.field) == (str(path), "p0")


def test_json_lines_keep_records_holding_unicode_line_separators(tmp_path):
    # U+2028 is valid inside a JSON string; splitting lines on it would cut the record in two.
    rows = [_hotpot("q0"), {**_hotpot("q1"), "question": "Which\u2028one\x0cis it?"}]
    path = tmp_path / "hotpot.jsonl"
    path.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in rows) + "\n", encoding="utf-8")
    examples = load_examples(path)
    assert [e.question for e in examples] == ["Question q0?", "Which\u2028one\x0cis it?"]


def test_byte_order_mark_counts_in_the_byte_offset(tmp_path):
    path = tmp_path / "hotpot.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps(_hotpot("q0")).encode() + b'\n{"_id": "q\xff1"}\n')
    with pytest.raises(DatasetFormatError) as info:
        load_examples(path, "hotpotqa")
    offset = path.read_bytes().index(b"\xff")
    assert f"byte 0xff at byte offset {offset} (line 2)" in str(info.value)
    assert info.value.index == 1


# ------------------------------------------------------------------------------ questions without gold


def _beir_folder(tmp_path: Path, qrels: list[tuple[str, str, int]], queries: list[str]) -> Path:
    folder = tmp_path / "beir"
    (folder / "qrels").mkdir(parents=True)
    corpus = [{"_id": "d0", "title": "Zero", "text": "Doc zero."}, {"_id": "d1", "title": "One", "text": "Doc one."}]
    (folder / "corpus.jsonl").write_text(_jsonl(corpus), encoding="utf-8")
    (folder / "queries.jsonl").write_text(_jsonl([{"_id": q, "text": f"{q}?"} for q in queries]), encoding="utf-8")
    rows = "".join(f"{q}\t{d}\t{s}\n" for q, d, s in qrels)
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n" + rows, encoding="utf-8")
    return folder


def test_beir_queries_without_gold_in_the_corpus_are_counted_skips(tmp_path, caplog):
    # BEIR releases hold qrels naming documents absent from the corpus and score-0 judgements; a query
    # left with no relevant document would score NaN recall, so it is dropped, counted per reason.
    qrels = [("u1", "d0", 1), ("u2", "gone", 1), ("u3", "d1", 0), ("u4", "gone", 2), ("u4", "d1", 0), ("u5", "d1", 1)]
    folder = _beir_folder(tmp_path, qrels, ["u1", "u2", "u3", "u4", "u5"])
    with caplog.at_level(logging.WARNING, logger="harness.data"):
        examples = load_examples(folder, "beir")
    assert [(e.question_id, e.gold_doc_ids) for e in examples] == [("u1", ("d0",)), ("u5", ("d1",))]
    qrels_path = folder / "qrels" / "test.tsv"
    assert [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING] == [
        f"skipped 2 of 5 queries whose relevant documents are all missing from corpus.jsonl in {qrels_path}",
        f"skipped 1 of 5 queries without a relevant judgement (score > 0) in {qrels_path}",
    ]


def test_beir_with_no_query_left_is_an_error_naming_the_qrels_file(tmp_path):
    folder = _beir_folder(tmp_path, [("u1", "gone", 1)], ["u1"])
    with pytest.raises(DatasetFormatError) as info:
        load_examples(folder, "beir")
    assert info.value.path == str(folder / "qrels" / "test.tsv")
    assert "no queries left out of 1: 1 whose relevant documents are all missing from corpus.jsonl" in str(info.value)


def test_ragbench_records_without_relevant_sentence_keys_are_counted_skips(tmp_path, caplog):
    # The release has rows whose documents support no sentence of the response: nothing is gold there.
    rows = [_ragbench("q0"), {**_ragbench("q1"), "all_relevant_sentence_keys": []}, _ragbench("q2")]
    path = tmp_path / "ragbench.jsonl"
    path.write_text(_jsonl(rows), encoding="utf-8")
    with caplog.at_level(logging.WARNING, logger="harness.data"):
        examples = load_examples(path, "ragbench")
    assert [e.question_id for e in examples] == ["q0", "q2"]
    assert [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING] == [
        f"skipped 1 of 3 records without relevant sentence keys in {path}"
    ]


@pytest.mark.parametrize("keys", [None, "0a"])
def test_ragbench_relevant_keys_not_a_list_are_an_error(tmp_path, keys):
    rows = [_ragbench("q0"), {**_ragbench("q1"), "all_relevant_sentence_keys": keys}]
    path = tmp_path / "ragbench.jsonl"
    path.write_text(_jsonl(rows), encoding="utf-8")
    with pytest.raises(DatasetFormatError) as info:
        load_examples(path, "ragbench")
    assert (info.value.path, info.value.index, info.value.record_id) == (str(path), 1, "q1")
    assert info.value.field == "all_relevant_sentence_keys"


# ---------------------------------------------------------------------------------- auto layout


def test_auto_layout_names_the_file_and_the_layout_it_looks_like(tmp_path):
    # dataset=hotpotqa dataset.layout=auto: the hotpotqa config's setting meets an IRCoT file.
    path = tmp_path / "hotpotqa_dev_subsampled.jsonl"
    path.write_text(_jsonl([_ircot("q0"), _ircot("q1")]), encoding="utf-8")
    with pytest.raises(DatasetFormatError) as info:
        load_examples(path, "auto", setting="distractor")
    message = str(info.value)
    assert info.value.path == str(path) and message.startswith(f"{path}: ")
    assert "looks like the 'ircot' layout" in message and "setting='distractor'" in message


def test_auto_layout_source_on_a_hotpotqa_file_names_the_file(tmp_path):
    path = tmp_path / "hotpot.json"
    path.write_text(json.dumps([_hotpot("q0")]), encoding="utf-8")
    with pytest.raises(DatasetFormatError) as info:
        load_examples(path, "auto", source="hotpotqa")
    assert info.value.path == str(path)
    assert "looks like the 'hotpotqa' layout" in str(info.value) and "source='hotpotqa'" in str(info.value)


def test_auto_layout_setting_on_a_squad_file_names_the_file(tmp_path):
    path = tmp_path / "covid.json"
    path.write_text(json.dumps({"data": [_squad_article("q0", 1)]}), encoding="utf-8")
    with pytest.raises(DatasetFormatError) as info:
        load_examples(path, "auto", setting="distractor")
    assert info.value.path == str(path) and "looks like the 'squad' layout" in str(info.value)


_IRCOT_SAMPLE = Path(__file__).resolve().parents[1] / "../shared/data/hotpotqa_ircot/hotpotqa_dev_subsampled_485.jsonl"


@pytest.mark.skipif(not _IRCOT_SAMPLE.is_file(), reason="shared IRCoT sample not present")
def test_hotpotqa_config_with_auto_layout_on_the_ircot_sample_names_it():
    from harness.data import load_dataset

    path = _IRCOT_SAMPLE.resolve()
    with pytest.raises(DatasetFormatError) as info:
        load_dataset(str(path), "auto", name="hotpotqa", setting="distractor")
    assert info.value.path == str(path) and "looks like the 'ircot' layout" in str(info.value)


# ------------------------------------------------------------------------------------- messages


def test_qasper_non_utf8_in_concatenated_papers_names_the_record(tmp_path):
    papers = [{"id": f"p{i}", **_paper(f"p{i}")} for i in range(3)]
    raw = "\n".join(json.dumps(p) for p in papers).encode()
    bad = raw.index(b"Paper p2") + 2
    path = tmp_path / "qasper.jsonl"
    path.write_bytes(raw[:bad] + b"\xff" + raw[bad:])
    with pytest.raises(DatasetFormatError) as info:
        load_qasper(path)
    assert f"byte 0xff at byte offset {bad}" in str(info.value) and info.value.index == 2


def test_qasper_non_utf8_in_a_list_of_papers_names_the_record(tmp_path):
    papers = [{"id": f"p{i}", **_paper(f"p{i}")} for i in range(3)]
    raw = json.dumps(papers, indent=1).encode()
    bad = raw.index(b"Paper p1") + 2
    path = tmp_path / "qasper.json"
    path.write_bytes(raw[:bad] + b"\xff" + raw[bad:])
    with pytest.raises(DatasetFormatError) as info:
        load_qasper(path)
    assert info.value.index == 1


def test_qasper_field_of_the_wrong_type_names_the_types_in_words(tmp_path):
    path = tmp_path / "qasper.json"
    path.write_text(json.dumps({"p0": _paper("p0"), "p1": {**_paper("p1"), "full_text": "Cats purr."}}))
    with pytest.raises(DatasetFormatError) as info:
        load_qasper(path)
    assert (info.value.index, info.value.record_id, info.value.field) == (1, "p1", "full_text")
    assert info.value.message == "expected a list or an object, got str"


def test_squad_context_given_as_a_list_says_so(tmp_path):
    top = {"data": [_squad_article("q0", 1), _squad_article("q1", 2)]}
    top["data"][1]["paragraphs"][0]["context"] = ["Title line", "Alpha beta gamma."]
    path = tmp_path / "covid.json"
    path.write_text(json.dumps(top), encoding="utf-8")
    with pytest.raises(DatasetFormatError) as info:
        load_examples(path, "squad")
    assert (info.value.index, info.value.field) == (1, "paragraphs[0].context")
    assert info.value.message == "expected a string, got a list"


@pytest.mark.parametrize("answer", [None, ["Use X [1]."], "  "])
def test_expertqa_bad_answer_string_names_the_system_field(tmp_path, answer):
    rows = [_expert("How to do A?"), _expert("How to do B?")]
    rows[1]["answers"]["sys"]["answer_string"] = answer
    path = tmp_path / "expert.jsonl"
    path.write_text(_jsonl(rows), encoding="utf-8")
    with pytest.raises(DatasetFormatError) as info:
        load_examples(path, "expertqa")
    assert (info.value.path, info.value.index, info.value.field) == (str(path), 1, "answers.sys.answer_string")


def test_expertqa_system_without_answer_string_is_a_format_error(tmp_path):
    rows = [_expert("How to do A?"), _expert("How to do B?")]
    del rows[1]["answers"]["sys"]["answer_string"]
    path = tmp_path / "expert.jsonl"
    path.write_text(_jsonl(rows), encoding="utf-8")
    with pytest.raises(DatasetFormatError) as info:
        load_examples(path, "expertqa")
    assert (info.value.index, info.value.field, info.value.message) == (1, "answers.sys.answer_string", "missing field")


def test_expertqa_answers_citing_no_evidence_text_are_counted_skips(tmp_path, caplog):
    # Evidence with text the answers never cite by [n] leaves no gold document to retrieve.
    uncited = _expert("Q1?", evidence=["[1] http://a\n\nAlpha text.", "[2] http://b"])
    uncited["answers"]["sys"]["answer_string"] = "Use X [2]."
    rows = [_expert("Q0?"), uncited, {**_expert("Q2?"), "answers": {"sys": {**_expert("Q2?")["answers"]["sys"]}}}]
    rows[2]["answers"]["sys"]["answer_string"] = "Use X."
    path = tmp_path / "expert.jsonl"
    path.write_text(_jsonl(rows), encoding="utf-8")
    with caplog.at_level(logging.WARNING, logger="harness.data"):
        examples = load_examples(path, "expertqa")
    assert [e.question for e in examples] == ["Q0?"]
    assert [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING] == [
        f"skipped 2 of 3 records whose answers cite no evidence with text in {path}"
    ]


def test_squad_answer_outside_every_passage_is_an_error(tmp_path):
    top = {"data": [_squad_article("q0", 1), _squad_article("q1", 2)]}
    paragraph = top["data"][1]["paragraphs"][0]
    paragraph["context"] = "Title line\n\n\n\n\n\nAlpha beta gamma. Delta epsilon."
    paragraph["qas"][0]["answers"] = [{"text": "Zeta", "answer_start": 11}]  # not in the text; offset in blank lines
    path = tmp_path / "covid.json"
    path.write_text(json.dumps(top), encoding="utf-8")
    with pytest.raises(DatasetFormatError) as info:
        squad.load_file(path, dataset="covidqa", split="test", passage_words=2)  # the title line is a passage
    err = info.value
    assert (err.index, err.record_id, err.field) == (1, "q1", "paragraphs[0].qas[0].answers")
    assert "no passage" in err.message
