"""The IRCoT processed-format loader: the shared HotpotQA subsample, answer objects, broken copies, configs."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

import pytest
from hydra.utils import instantiate

from harness.cache.fingerprint import example_digests
from harness.data import DatasetFormatError, detect_layout, load_dataset, load_examples
from harness.run.pipeline import dataset_loader_config
from tests.conftest import REPO, SHARED_DATA, compose_cfg

IRCOT = SHARED_DATA / "hotpotqa_ircot" / "hotpotqa_dev_subsampled_485.jsonl"
HOTPOT = SHARED_DATA / "hotpotqa" / "hotpot_dev_distractor_v1_100.json"
# Questions of the 103-question HotpotQA sample that the IRCoT subsample does not hold (the other 100 it does).
NOT_IN_IRCOT = {"5abc0a5d5542993f40c73c64", "5a85fb085542994775f606de", "5aba5d2e55429901930fa799"}


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _squash(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def _write(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


# --------------------------------------------------------------------------------------------
# the shared HotpotQA subsample


@pytest.fixture(scope="module")
def ircot_examples():
    return load_examples(IRCOT, "ircot", source="hotpotqa")


def test_shared_hotpotqa_subsample(ircot_examples):
    examples = ircot_examples
    raw = _lines(IRCOT)
    assert len(examples) == len(raw) == 485
    assert len({e.question_id for e in examples}) == 485
    assert {(e.dataset, e.split) for e in examples} == {("hotpotqa_ircot", "dev")}
    for e, r in zip(examples, raw, strict=True):
        assert e.question_id == r["question_id"] and e.question == r["question_text"].strip()
        ids = [d.doc_id for d in e.documents]
        assert len(set(ids)) == len(ids) == len(r["contexts"])
        assert e.gold_doc_ids and set(e.gold_doc_ids) <= set(ids)
        supporting = [c for c in r["contexts"] if c["is_supporting"]]
        assert e.hops == len(e.gold_doc_ids) == len(supporting)
        assert [e.document(d).title for d in e.gold_doc_ids] == [c["title"] for c in supporting]
        assert e.answers == tuple(s.strip() for s in r["answers_objects"][0]["spans"])
        for d, c in zip(e.documents, r["contexts"], strict=True):
            assert d.doc_id == f"{e.question_id}::{c['id']}"  # the released context ids are positions
            assert d.title == c["title"]
            # Splitting only cuts at whitespace: the sentences re-joined give the paragraph back.
            assert _squash(" ".join(d.sentences)) == _squash(c["paragraph_text"])
        assert e.metadata == {"source": "hotpotqa", "support_level": "paragraph", "supporting_sentences": None}
    assert Counter(e.hops for e in examples) == {2: 485}
    # 474 questions carry 10 paragraphs; 11 fewer (IRCoT dropped repeated paragraph texts).
    assert Counter(len(e.documents) for e in examples) == {10: 474, 2: 7, 8: 2, 6: 1, 5: 1}
    assert sum(1 for e in examples if e.documents and len(e.documents) < 10) == 11
    # Multi-sentence paragraphs are actually split.
    assert sum(len(d.sentences) > 1 for e in examples for d in e.documents) > 3000

    known = next(e for e in examples if e.question_id == "5a8c7595554299585d9e36b6")
    assert known.answers == ("Chief of Protocol",)
    assert [known.document(d).title for d in known.gold_doc_ids] == ["Shirley Temple", "Kiss and Tell (1945 film)"]
    assert known.gold_doc_ids == ("5a8c7595554299585d9e36b6::1", "5a8c7595554299585d9e36b6::6")
    assert known.document(known.gold_doc_ids[0]).sentences[-1] == (
        "As an adult, she was named United States ambassador to Ghana and to Czechoslovakia and also "
        "served as Chief of Protocol of the United States."
    )
    assert len(set(example_digests(examples))) == 485  # metadata with None hashes like any other


def test_shared_subsample_agrees_with_the_hotpotqa_sample(ircot_examples):
    by_id = {e.question_id: e for e in ircot_examples}
    hotpot = load_examples(HOTPOT)
    assert len(hotpot) == 103
    # The 103 HotpotQA questions are in the IRCoT file by id, but for three.
    assert {e.question_id for e in hotpot} - set(by_id) == NOT_IN_IRCOT
    shared = [e for e in hotpot if e.question_id in by_id]
    assert len(shared) == 100
    for h in shared:
        e = by_id[h.question_id]
        assert (e.question, e.answers, e.hops) == (h.question, h.answers, h.hops)
        assert {e.document(d).title for d in e.gold_doc_ids} == {h.document(d).title for d in h.gold_doc_ids}
        assert {d.title for d in e.documents} == {d.title for d in h.documents}


def test_layout_is_recognised_and_the_default_name_follows_the_source():
    assert detect_layout(_lines(IRCOT)[0], IRCOT) == "ircot"
    examples = load_examples(IRCOT)  # layout sniffed, no source
    assert len(examples) == 485 and {e.dataset for e in examples} == {"ircot"}
    assert examples[0].metadata["source"] is None
    assert load_examples(IRCOT, source="hotpotqa", name="mine")[0].dataset == "mine"


def test_source_is_checked():
    with pytest.raises(ValueError, match="unknown IRCoT source 'nq'"):
        load_examples(IRCOT, "ircot", source="nq")
    with pytest.raises(ValueError, match="source='musique' applies to the ircot layout only, not 'hotpotqa'"):
        load_examples(HOTPOT, "hotpotqa", source="musique")
    with pytest.raises(ValueError, match="applies to the ircot layout only, not 'hotpotqa'"):
        load_examples(HOTPOT, source="hotpotqa")  # sniffed as HotpotQA


# --------------------------------------------------------------------------------------------
# answer objects and the other sources


def _answer(number="", date=("", "", ""), spans=()):
    day, month, year = date
    return {"number": number, "date": {"day": day, "month": month, "year": year}, "spans": list(spans)}


def _record(qid, answers_objects, supporting=(0, 2), **extra):
    return {
        "question_id": qid,
        "question_text": f" Question {qid}? ",
        "answers_objects": answers_objects,
        "contexts": [
            {
                "id": str(i),
                "title": f" T{i} ",
                "paragraph_text": f"Paragraph {i} opens.  Dr. Lee wrote it in 1990.",
                "is_supporting": i in supporting,
            }
            for i in range(4)
        ],
        **extra,
    }


def test_number_date_and_span_answers(tmp_path):
    records = [
        _record("num", [_answer(number="42")]),
        _record("int", [_answer(number=7)]),
        _record("date", [_answer(date=("12", "May", "1990"))]),
        _record("month", [_answer(date=("", "May", "1990"))]),
        _record("year", [_answer(date=("", "", 1990))]),
        _record("none", [{"number": None, "date": {"day": None, "month": None, "year": "1871"}, "spans": None}]),
        _record("spans", [_answer(spans=[" Lee ", "Dr. Lee", "Lee", " "])]),
        # an empty object is passed over; several objects are alternatives, in order
        _record("objects", [_answer(), _answer(spans=["four"]), _answer(number="4"), _answer(spans=["four"])]),
        _record("missing", [{"spans": ["only spans"]}]),
    ]
    examples = load_examples(_write(tmp_path / "dev_subsampled.jsonl", records), "ircot")
    assert {e.question_id: e.answers for e in examples} == {
        "num": ("42",),
        "int": ("7",),
        "date": ("12 May 1990",),
        "month": ("May 1990",),
        "year": ("1990",),
        "none": ("1871",),
        "spans": ("Lee", "Dr. Lee"),
        "objects": ("four", "4"),
        "missing": ("only spans",),
    }
    e = examples[0]
    assert e.question == "Question num?" and e.split == "dev" and e.dataset == "ircot"
    assert e.gold_doc_ids == ("num::0", "num::2") and e.hops == 2
    assert e.documents[1].title == "T1"
    assert e.documents[1].sentences == ("Paragraph 1 opens.", "Dr. Lee wrote it in 1990.")
    assert e.metadata["supporting_sentences"] is None and e.metadata["support_level"] == "paragraph"


def test_musique_and_2wiki_files_in_the_same_layout(tmp_path):
    # IRCoT's processing scripts number contexts with "idx" and add their own keys; both are fine.
    musique = [
        _record("3hop1__1_2_3", [_answer(spans=["Lee"])], supporting=(0, 1, 3), dataset="musique"),
        _record("2hop__4_5", [_answer(spans=["Ann"])], reasoning_steps=["a >>>> b"]),
    ]
    for record in musique:
        for position, context in enumerate(record["contexts"]):
            del context["id"]
            context["idx"] = position
    (m3, m2) = load_examples(_write(tmp_path / "m.jsonl", musique), "ircot", source="musique")
    assert (m3.dataset, m3.qtype, m3.hops, m3.metadata["source"]) == ("musique_ircot", "3hop1", 3, "musique")
    assert (m2.qtype, m2.hops) == ("2hop", 2)

    wiki = [_record("w1", [_answer(spans=["yes"])], type="comparison", level="hard", dataset="2wikimultihopqa")]
    (w,) = load_examples(_write(tmp_path / "w.jsonl", wiki), "ircot", source="2wikimultihopqa")
    assert (w.dataset, w.qtype, w.metadata["level"]) == ("2wikimultihopqa_ircot", "comparison", "hard")

    path = _write(tmp_path / "wrong.jsonl", wiki)
    with pytest.raises(DatasetFormatError) as info:
        load_examples(path, "ircot", source="musique")
    assert (info.value.index, info.value.record_id, info.value.field) == (0, "w1", "dataset")
    assert "'2wikimultihopqa'" in str(info.value) and "source 'musique'" in str(info.value)


# --------------------------------------------------------------------------------------------
# broken copies of the shared file

BROKEN = 7  # the record each case breaks


def _drop(key):
    return lambda r: r.pop(key)


def _set(key, value):
    return lambda r: r.__setitem__(key, value)


def _in_context(position, change):
    return lambda r: change(r["contexts"][position])


def _no_support(r):
    for context in r["contexts"]:
        context["is_supporting"] = False


def _all_answers_empty(r):
    r["answers_objects"] = [_answer(), {"number": "  ", "spans": ["", " "], "date": {"year": ""}}]


BREAKS = {
    "missing question_text": (_drop("question_text"), "question_text", "missing field"),
    "blank question_text": (_set("question_text", "   "), "question_text", "empty string"),
    "question_text not text": (_set("question_text", ["Q"]), "question_text", "expected a string, got list"),
    "missing question_id": (_drop("question_id"), "question_id", "missing field"),
    "blank question_id": (_set("question_id", " "), "question_id", "empty question id"),
    "contexts not a list": (_set("contexts", {"0": "text"}), "contexts", "expected a list, got dict"),
    "missing contexts": (_drop("contexts"), "contexts", "missing field"),
    "empty contexts": (_set("contexts", []), "contexts", "empty context"),
    "context not an object": (
        lambda r: r["contexts"].__setitem__(3, "Paragraph text"),
        "contexts[3]",
        "expected an object, got str",
    ),
    "context missing title": (_in_context(3, _drop("title")), "contexts[3]", "'title' is missing"),
    "context missing text": (_in_context(3, _drop("paragraph_text")), "contexts[3]", "'paragraph_text' is missing"),
    "context null text": (_in_context(3, _set("paragraph_text", None)), "contexts[3]", "'paragraph_text' is null"),
    "context blank text": (_in_context(3, _set("paragraph_text", "  ")), "contexts[3]", "has no text"),
    "context missing flag": (_in_context(3, _drop("is_supporting")), "contexts[3]", "'is_supporting' is missing"),
    "context flag not bool": (
        _in_context(3, _set("is_supporting", "yes")),
        "contexts[3]",
        "'is_supporting' is not bool",
    ),
    "no supporting paragraph": (_no_support, "contexts", "no supporting paragraph"),
    "missing answers_objects": (_drop("answers_objects"), "answers_objects", "missing field"),
    "empty answers_objects": (_set("answers_objects", []), "answers_objects", "no answer objects"),
    "no usable answer": (_all_answers_empty, "answers_objects", "no usable answer"),
    "answer not an object": (_set("answers_objects", ["Lee"]), "answers_objects[0]", "expected an object, got str"),
    "span not text": (
        _set("answers_objects", [_answer(spans=["Lee", 3])]),
        "answers_objects[0]",
        "span 1 is int, not a string",
    ),
    "spans not a list": (
        _set("answers_objects", [{"spans": "Lee"}]),
        "answers_objects[0]",
        "'spans' is str, not a list",
    ),
    "number not a number": (
        _set("answers_objects", [_answer(number=[4])]),
        "answers_objects[0]",
        "'number' is list, not a string or number",
    ),
    "date not an object": (
        _set("answers_objects", [{"date": "1990", "spans": []}]),
        "answers_objects[0]",
        "'date' is str, not an object",
    ),
}


@pytest.mark.parametrize("case", list(BREAKS))
def test_broken_copy_names_file_record_and_field(tmp_path, case):
    records = _lines(IRCOT)
    change, field, message = BREAKS[case]
    qid = records[BROKEN]["question_id"]
    change(records[BROKEN])
    path = _write(tmp_path / "hotpotqa_dev_subsampled_485.jsonl", records)
    with pytest.raises(DatasetFormatError) as info:
        load_examples(path, "ircot", source="hotpotqa")
    err = info.value
    # The error names the id as the record gives it (none when it is missing).
    record_id = records[BROKEN].get("question_id") if field == "question_id" else qid
    assert (err.path, err.index, err.record_id, err.field) == (str(path), BROKEN, record_id, field)
    assert message in err.message
    assert str(err).startswith(f"{path}: record {BROKEN}")
    assert len(str(err)) < 400  # never the record's content


def test_broken_copy_with_a_repeated_question_id(tmp_path):
    records = _lines(IRCOT)
    first = records[2]["question_id"]
    records[BROKEN]["question_id"] = first
    path = _write(tmp_path / "dev.jsonl", records)
    with pytest.raises(DatasetFormatError) as info:
        load_examples(path, "ircot", source="hotpotqa")
    err = info.value
    assert (err.path, err.index, err.record_id, err.field) == (str(path), BROKEN, first, "question_id")
    assert "duplicate question id (first at record 2)" in str(err)


def test_broken_copy_with_an_invalid_json_line(tmp_path):
    lines = IRCOT.read_text(encoding="utf-8").splitlines()
    lines[BROKEN] = lines[BROKEN][:-40]  # cut inside the record
    path = tmp_path / "dev.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(DatasetFormatError) as info:
        load_examples(path, "ircot", source="hotpotqa")
    err = info.value
    assert (err.path, err.index) == (str(path), BROKEN)
    assert f"invalid or truncated JSON on line {BROKEN + 1}" in str(err) and err.__cause__ is None


# --------------------------------------------------------------------------------------------
# configs


def test_config_composes_and_instantiates_with_a_sample(monkeypatch):
    name = "hotpotqa_fork_dev_subsampled"  # the IRCoT-format file beside the repository is that fork's
    cfg = compose_cfg([f"dataset={name}", "dataset.sample_size=20", "seed=3"])
    node = cfg.dataset
    assert (node.layout, node.source, node.name, node.sample_size) == ("ircot", "hotpotqa", name, 20)
    assert (REPO / node.path).resolve() == IRCOT.resolve()
    monkeypatch.chdir(REPO)  # config paths are relative to the project root
    sample = instantiate(dataset_loader_config(node))
    assert len(sample) == 20 and {e.dataset for e in sample} == {name}
    assert sample == load_dataset(IRCOT, "ircot", 20, 3, name, source="hotpotqa", split="dev")
    ids = {e.question_id for e in load_examples(IRCOT)}
    assert {e.question_id for e in sample} <= ids


@pytest.mark.parametrize("config, source", [("musique_ircot", "musique"), ("2wikimultihopqa_ircot", "2wikimultihopqa")])
def test_the_other_sources_compose_and_read_a_file_given_as_path(tmp_path, config, source):
    qid = {"musique": "2hop__1_2", "2wikimultihopqa": "b088d3ca08e211ebbda4ac1f6bf848b6"}[source]
    path = _write(tmp_path / "test_subsampled.jsonl", [_record(qid, [_answer(spans=["Lee"])])])
    cfg = compose_cfg([f"dataset={config}", f"dataset.path={path}"])
    assert (cfg.dataset.layout, cfg.dataset.source, cfg.dataset.name) == ("ircot", source, config)
    (e,) = instantiate(dataset_loader_config(cfg.dataset))
    assert (e.dataset, e.split, e.metadata["source"]) == (config, "test", source)
