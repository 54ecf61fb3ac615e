"""Loaders on the real benchmark samples, the packaged demo set, broken files and subsampling."""

from __future__ import annotations

import json
import logging
import pickle
import re
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from hydra.utils import instantiate

from harness.data import DatasetFormatError, detect_layout, load_dataset, load_examples
from harness.run.pipeline import dataset_loader_config
from tests.conftest import compose_cfg

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"
HOTPOT = SHARED_DATA / "hotpotqa" / "hotpot_dev_distractor_v1_100.json"
FULLWIKI = SHARED_DATA / "hotpotqa_fullwiki" / "hotpot_fullwiki_dev_sample.jsonl"
MUSIQUE = SHARED_DATA / "musique" / "musique_ans_dev_sample.jsonl"
TWOWIKI = SHARED_DATA / "2wikimultihopqa" / "2wiki_dev_sample.jsonl"


def _needs(path: Path):
    return pytest.mark.skipif(not path.is_file(), reason=f"shared sample {path} not present")


def _raw(path: Path) -> list[dict]:
    if path.suffix == ".jsonl":
        return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return json.loads(path.read_text(encoding="utf-8"))


def _squash(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def _check_ids(examples):
    assert len({e.question_id for e in examples}) == len(examples)
    for e in examples:
        ids = [d.doc_id for d in e.documents]
        assert len(set(ids)) == len(ids)
        assert set(e.gold_doc_ids) <= set(ids)
        assert e.answers and all(a and a == a.strip() for a in e.answers)
        assert len(set(e.answers)) == len(e.answers)
        for d in e.documents:
            assert isinstance(d.sentences, tuple) and all(isinstance(s, str) for s in d.sentences)


# --------------------------------------------------------------------------------------------
# real samples


@_needs(HOTPOT)
def test_hotpotqa_distractor_sample():
    examples = load_examples(HOTPOT)  # layout sniffed
    raw = _raw(HOTPOT)
    assert len(examples) == 103
    _check_ids(examples)
    assert all(len(e.gold_doc_ids) == 2 and e.hops == 2 for e in examples)
    # 102 questions carry the usual 10 paragraphs; one upstream record ships only its 2 gold ones.
    assert Counter(len(e.documents) for e in examples) == {10: 102, 2: 1}
    assert [e.question_id for e in examples if len(e.documents) == 2] == ["5abd259d55429924427fcf1a"]
    assert Counter(e.qtype for e in examples) == {"bridge": 82, "comparison": 21}
    assert {(e.dataset, e.split) for e in examples} == {("hotpotqa", "dev")}
    for e, r in zip(examples, raw, strict=False):
        gold_titles = {e.document(d).title for d in e.gold_doc_ids}
        assert gold_titles == {t for t, _ in r["supporting_facts"]}
        assert e.answers == (r["answer"],)
        assert [d.title for d in e.documents] == [t for t, _ in r["context"]]

    first = examples[0]
    assert first.question == "Were Scott Derrickson and Ed Wood of the same nationality?"
    assert first.answers == ("yes",)
    assert [first.document(d).title for d in first.gold_doc_ids] == ["Scott Derrickson", "Ed Wood"]
    derrickson = first.document(first.gold_doc_ids[0])
    assert derrickson.doc_id == "5a8b57f25542995d1e6f1371::1"
    assert derrickson.sentences[1] == "He lives in Los Angeles, California."  # leading space stripped
    assert ("5a8b57f25542995d1e6f1371::1", 0) in first.metadata["supporting_sentences"]


@_needs(FULLWIKI)
def test_hotpotqa_fullwiki_sample_keeps_questions_with_missing_gold():
    examples = load_examples(FULLWIKI, "hotpotqa", setting="fullwiki")
    raw = _raw(FULLWIKI)
    assert len(examples) == 250
    _check_ids(examples)
    assert {e.dataset for e in examples} == {"hotpotqa_fullwiki"}
    assert all(e.hops == 2 for e in examples)  # every question cites 2 titles, present or not
    for e, r in zip(examples, raw, strict=False):
        context_titles = {t for t, _ in r["context"]}
        cited = {t for t, _ in r["supporting_facts"]}
        assert {e.document(d).title for d in e.gold_doc_ids} == cited & context_titles
        assert set(e.metadata["missing_gold_titles"]) == cited - context_titles
    assert Counter(len(e.gold_doc_ids) for e in examples) == {1: 138, 2: 79, 0: 33}
    first = examples[0]
    assert first.metadata["missing_gold_titles"] == ("Kansas Song",)
    assert [first.document(d).title for d in first.gold_doc_ids] == ["University of Kansas"]
    # Two records come with an empty retrieved context: kept, with no documents at all.
    assert sum(1 for e in examples if not e.documents) == 2


@_needs(FULLWIKI)
def test_fullwiki_file_read_as_distractor_names_the_missing_title():
    with pytest.raises(DatasetFormatError) as info:
        load_examples(FULLWIKI, "hotpotqa")
    message = str(info.value)
    assert "record 0 (id '5a7166395542994082a3e814')" in message
    assert "field 'supporting_facts'" in message and "Kansas Song" in message and "fullwiki" in message


@_needs(MUSIQUE)
def test_musique_sample():
    examples = load_examples(MUSIQUE)
    raw = _raw(MUSIQUE)
    assert len(examples) == 100
    _check_ids(examples)
    assert {(e.dataset, e.split, e.qtype, e.hops) for e in examples} == {("musique", "dev", "2hop", 2)}
    for e, r in zip(examples, raw, strict=False):
        assert len(e.documents) == len(r["paragraphs"]) == 20
        supporting = [f"{r['id']}::{p['idx']}" for p in r["paragraphs"] if p["is_supporting"]]
        assert list(e.gold_doc_ids) == supporting
        assert e.answers[0] == r["answer"]
        for d, p in zip(e.documents, r["paragraphs"], strict=False):
            # Splitting only cuts at whitespace: the sentences re-joined give the paragraph back.
            assert _squash(" ".join(d.sentences)) == _squash(p["paragraph_text"])
    first = examples[0]
    assert first.question_id == "2hop__574419_270105"
    assert first.gold_doc_ids == ("2hop__574419_270105::1", "2hop__574419_270105::8")
    assert first.answers == ("Stanley",)
    assert first.document(first.gold_doc_ids[0]).sentences[0] == (
        "The Mountrail County Courthouse in Stanley, North Dakota was built in 1914 and served "
        "Mountrail County as its courthouse continuously since then."
    )
    assert first.metadata["answerable"] is True
    assert len(first.metadata["decomposition"]) == 2
    # Multi-sentence paragraphs are actually split.
    assert np.mean([len(d.sentences) for e in examples for d in e.documents]) > 2


@_needs(TWOWIKI)
def test_2wikimultihopqa_sample(caplog):
    raw = _raw(TWOWIKI)
    with_context = [r for r in raw if r.get("context") is not None]
    with caplog.at_level(logging.WARNING, logger="harness.data"):
        examples = load_examples(TWOWIKI)
    # The shared sample's rows all carry 'context', so nothing is skipped and nothing is logged.
    assert len(examples) == len(with_context) == 100
    assert not [r for r in caplog.records if "skipped" in r.getMessage()]
    _check_ids(examples)
    assert {(e.dataset, e.split) for e in examples} == {("2wikimultihopqa", "dev")}
    assert Counter(e.hops for e in examples) == {2: 71, 4: 29}
    assert all(len(e.gold_doc_ids) == e.hops for e in examples)
    assert Counter(e.qtype for e in examples) == {
        "compositional": 45,
        "bridge_comparison": 29,
        "comparison": 16,
        "inference": 10,
    }
    # A context that repeats a title still yields distinct document ids.
    repeat = next(e for e in examples if e.question_id == "72cfea12086711ebbd5eac1f6bf848b6")
    titles = [d.title for d in repeat.documents]
    assert titles[0] == titles[1] == "Seven Guns to Mesa"
    assert repeat.documents[0].doc_id != repeat.documents[1].doc_id


def test_2wiki_rows_without_context_are_skipped_with_one_counted_warning(tmp_path, caplog):
    def row(qid, with_context=True):
        r = {
            "_id": qid,
            "type": "comparison",
            "question": f"Question {qid}?",
            "answer": "A",
            "supporting_facts": [["A", 0], ["B", 0]],
            "evidences": [["A", "p", "B"]],
        }
        if with_context:
            r["context"] = [["A", ["A is one."]], ["B", ["B is two."]], ["C", ["C is three."]]]
        return r

    path = tmp_path / "two.jsonl"
    rows = [row("a", False), row("b"), row("c", False), row("d"), row("e", False)]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    with caplog.at_level(logging.WARNING, logger="harness.data"):
        examples = load_examples(path)
    assert [e.question_id for e in examples] == ["b", "d"]
    assert examples[0].gold_doc_ids == ("b::0", "b::1")
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings == [f"skipped 3 of 5 records without 'context' in {path}"]


def test_demo_set():
    examples = load_dataset()
    assert len(examples) == 12
    _check_ids(examples)
    assert {(e.dataset, e.hops) for e in examples} == {("demo", 2)}
    assert {e.qtype for e in examples} == {"bridge", "comparison"}
    for e in examples:
        assert len(e.gold_doc_ids) == 2
        assert 6 <= len(e.documents) <= 8
        assert all(2 <= len(d.sentences) <= 4 for d in e.documents)
        answer = e.answers[0]
        if answer not in ("yes", "no"):
            gold_text = " ".join(e.document(d).text for d in e.gold_doc_ids)
            assert answer in gold_text
    assert load_examples(None) == examples


def test_layout_detection_on_real_files():
    cases = {HOTPOT: "hotpotqa", FULLWIKI: "hotpotqa", MUSIQUE: "musique", TWOWIKI: "2wiki"}
    present = {p: layout for p, layout in cases.items() if p.is_file()}
    if not present:
        pytest.skip(f"no shared samples under {SHARED_DATA}")
    for path, layout in present.items():
        assert detect_layout(_raw(path)[0], path) == layout


# --------------------------------------------------------------------------------------------
# broken files


def _hotpot_record(qid, question="Which one?", context=None):
    return {
        "_id": qid,
        "question": question,
        "answer": "X",
        "supporting_facts": [["A", 0], ["B", 1]],
        "context": context
        if context is not None
        else [["A", ["A is X.", " A is also Y."]], ["B", ["B is Z.", " B links to A."]], ["C", ["C."]]],
        "type": "bridge",
        "level": "easy",
    }


def _write(path: Path, records, jsonl=False) -> Path:
    if jsonl:
        path.write_text("\n".join(json.dumps(r) for r in records) + "\n")
    else:
        path.write_text(json.dumps(records))
    return path


def test_small_hotpot_file_json_and_jsonl_agree(tmp_path):
    records = [_hotpot_record("q1"), _hotpot_record("q2")]
    as_list = load_examples(_write(tmp_path / "h.json", records))
    as_lines = load_examples(_write(tmp_path / "h.jsonl", records, jsonl=True))
    assert as_list == as_lines
    e = as_list[0]
    assert e.gold_doc_ids == ("q1::0", "q1::1")
    assert e.document("q1::0").sentences == ("A is X.", "A is also Y.")
    assert e.metadata["supporting_sentences"] == (("q1::0", 0), ("q1::1", 1))
    assert e.split == "test"  # the file name names no split


def test_truncated_json_list_names_record_and_char_position(tmp_path):
    path = tmp_path / "hotpot.json"
    full = json.dumps([_hotpot_record("q1"), _hotpot_record("q2"), _hotpot_record("q3")])
    cut = full.index('"q3"') + 10
    path.write_text(full[:cut])
    with pytest.raises(DatasetFormatError) as info:
        load_examples(path)
    err = info.value
    assert err.index == 2 and err.path == str(path)
    assert str(err).startswith(f"{path}: record 2: ")
    assert "invalid or truncated JSON at char" in str(err)
    char = int(re.search(r"at char (\d+)", str(err)).group(1))
    assert full.index('{"_id": "q3"') <= char <= cut


def test_truncated_json_lines_names_the_line(tmp_path):
    path = tmp_path / "musique.jsonl"
    lines = [json.dumps(_hotpot_record(f"q{i}")) for i in range(3)]
    path.write_text(lines[0] + "\n\n" + lines[1] + "\n" + lines[2][:40] + "\n")
    with pytest.raises(DatasetFormatError) as info:
        load_examples(path)
    message = str(info.value)
    assert message.startswith(f"{path}: record 2: ")
    assert "line 4" in message  # the blank line still counts as a line of the file


def test_missing_question_names_file_record_id_and_field(tmp_path):
    record = _hotpot_record("q2")
    del record["question"]
    path = _write(tmp_path / "hotpot.json", [_hotpot_record("q1"), record])
    with pytest.raises(DatasetFormatError) as info:
        load_examples(path)
    assert str(info.value) == f"{path}: record 1 (id 'q2'): field 'question': missing field"
    assert (info.value.index, info.value.record_id, info.value.field) == (1, "q2", "question")


def _musique_record(qid):
    paragraphs = [
        {
            "idx": i,
            "title": f"T{i}",
            "paragraph_text": f"Paragraph {i} opens. Dr. Lee wrote it.",
            "is_supporting": i in (0, 2),
        }
        for i in range(4)
    ]
    return {
        "id": qid,
        "paragraphs": paragraphs,
        "question": "Who wrote it?",
        "answer": "Lee",
        "answer_aliases": ["Dr. Lee", " Lee ", ""],
        "answerable": True,
        "question_decomposition": [
            {"id": 1, "question": "a", "answer": "b", "paragraph_support_idx": 0},
            {"id": 2, "question": "#1 c", "answer": "Lee", "paragraph_support_idx": 2},
        ],
    }


def test_small_musique_file(tmp_path):
    path = _write(tmp_path / "m.jsonl", [_musique_record("3hop1__1_2_3")], jsonl=True)
    (e,) = load_examples(path)
    assert e.answers == ("Lee", "Dr. Lee")  # stripped, deduplicated, blanks dropped
    assert e.gold_doc_ids == ("3hop1__1_2_3::0", "3hop1__1_2_3::2")
    assert (e.qtype, e.hops) == ("3hop1", 2)
    assert e.documents[1].sentences == ("Paragraph 1 opens.", "Dr. Lee wrote it.")
    assert e.metadata["decomposition"] == (("a", "b"), ("#1 c", "Lee"))


def test_missing_question_in_musique(tmp_path):
    good = _musique_record("2hop__1_1")
    bad = _musique_record("2hop__1_2")
    del bad["question"]
    path = _write(tmp_path / "m.jsonl", [good, bad], jsonl=True)
    with pytest.raises(
        DatasetFormatError, match=r"m\.jsonl: record 1 \(id '2hop__1_2'\): field 'question': missing field"
    ):
        load_examples(path)


def test_empty_context(tmp_path):
    path = _write(tmp_path / "hotpot.json", [_hotpot_record("q1"), _hotpot_record("q7", context=[])])
    with pytest.raises(DatasetFormatError) as info:
        load_examples(path)
    assert str(info.value) == f"{path}: record 1 (id 'q7'): field 'context': empty context"


def test_duplicate_question_ids(tmp_path):
    records = [_hotpot_record("a"), _hotpot_record("b"), _hotpot_record("a")]
    path = _write(tmp_path / "hotpot.jsonl", records, jsonl=True)
    with pytest.raises(DatasetFormatError) as info:
        load_examples(path)
    assert str(info.value) == (f"{path}: record 2 (id 'a'): field '_id': duplicate question id (first at record 0)")


def test_unknown_layout_names_the_keys(tmp_path):
    path = _write(tmp_path / "squad.json", [{"id": "s1", "title": "T", "paragraphs": "..."}])
    with pytest.raises(DatasetFormatError) as info:
        load_examples(path)
    message = str(info.value)
    assert message.startswith(f"{path}: record 0 (id 's1'): unknown layout")
    assert "['id', 'paragraphs', 'title']" in message


def test_bad_arguments_are_value_errors(tmp_path):
    path = _write(tmp_path / "h.json", [_hotpot_record("q1")])
    with pytest.raises(ValueError, match="unknown layout 'nosuchlayout'"):
        load_examples(path, "nosuchlayout")
    with pytest.raises(ValueError, match="setting='fullwiki' applies to the hotpotqa layout only"):
        load_examples(path, "musique", setting="fullwiki")
    with pytest.raises(ValueError, match="unknown HotpotQA setting 'open'"):
        load_examples(path, "hotpotqa", setting="open")
    with pytest.raises(FileNotFoundError, match="nowhere.json"):
        load_examples(tmp_path / "nowhere.json")


def test_error_survives_pickling():
    err = DatasetFormatError("f.json", "empty context", 3, "abc", "context")
    again = pickle.loads(pickle.dumps(err))
    assert str(again) == str(err) == "f.json: record 3 (id 'abc'): field 'context': empty context"
    assert isinstance(again, ValueError)


# --------------------------------------------------------------------------------------------
# subsampling and configs


@_needs(HOTPOT)
def test_subsample_is_reproducible_and_in_file_order():
    everything = load_dataset(HOTPOT)
    sample = load_dataset(HOTPOT, sample_size=10, seed=7)
    assert sample == load_dataset(HOTPOT, sample_size=10, seed=7)
    expected = np.sort(np.random.default_rng(7).choice(103, size=10, replace=False))
    assert [e.question_id for e in sample] == [everything[i].question_id for i in expected]
    positions = [everything.index(e) for e in sample]
    assert positions == sorted(positions)
    other = load_dataset(HOTPOT, sample_size=10, seed=8)
    assert [e.question_id for e in other] != [e.question_id for e in sample]
    assert load_dataset(HOTPOT, sample_size=500) == everything
    for bad in (0, -3, 2.5, True):
        with pytest.raises(ValueError, match="sample_size"):
            load_dataset(HOTPOT, sample_size=bad)


def test_relative_path_is_read_from_the_launch_directory(tmp_path, monkeypatch):
    _write(tmp_path / "small_train.json", [_hotpot_record("q1")])
    monkeypatch.chdir(tmp_path)
    examples = load_dataset("small_train.json")
    assert [(e.question_id, e.split) for e in examples] == [("q1", "train")]


@pytest.mark.parametrize(
    ("config", "count", "data_file"),
    [
        ("demo", 12, None),
        ("hotpotqa", 103, HOTPOT),
        ("hotpotqa_fullwiki", 250, FULLWIKI),
        ("musique", 100, MUSIQUE),
        ("2wikimultihopqa", 100, TWOWIKI),
    ],
)
def test_dataset_configs_instantiate(config, count, data_file, monkeypatch):
    if data_file is not None and not data_file.is_file():
        pytest.skip(f"shared sample {data_file} not present")
    monkeypatch.chdir(REPO)  # relative config paths are relative to the launch folder
    cfg = compose_cfg([f"dataset={config}", "seed=3"])  # its path under paths.data_dir: the samples, in tests
    node = cfg.dataset
    examples = instantiate(dataset_loader_config(cfg.dataset))
    assert len(examples) == count
    assert {e.dataset for e in examples} == {config}
    cfg.dataset.sample_size = 5
    sample = instantiate(dataset_loader_config(cfg.dataset))
    assert sample == load_dataset(examples_path(node), node.layout, 5, 3, config, setting=node.get("setting"))


def examples_path(node):
    return None if node.path is None else REPO / node.path


def test_question_ids_file_keeps_exactly_the_listed_questions(tmp_path):
    every = load_dataset(HOTPOT, "hotpotqa")
    chosen = [every[7].question_id, every[2].question_id]
    ids = tmp_path / "ids.txt"
    ids.write_text(f"# two of them\n{chosen[0]}\n\n{chosen[1]}  # trailing comment\n")
    kept = load_dataset(HOTPOT, "hotpotqa", question_ids_file=ids)
    assert [e.question_id for e in kept] == [every[2].question_id, every[7].question_id]  # file order
    ids.write_text(f"{chosen[0]}\nnot-a-question\n")
    with pytest.raises(DatasetFormatError, match=r"1 of its 2 question ids are not in .*not-a-question"):
        load_dataset(HOTPOT, "hotpotqa", question_ids_file=ids)


def test_the_replication_ids_file_names_every_question_of_the_sample_the_figures_rest_on():
    cfg = compose_cfg(["+sweeps=replication_packing"])
    examples = instantiate(dataset_loader_config(cfg.dataset))
    assert len(examples) == 485 and Path(cfg.dataset.question_ids_file).name == "hotpotqa_fork_dev_subsampled_485.txt"
