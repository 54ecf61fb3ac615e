"""The dataset format registry: every format is one registered record, and a format from outside the
package is read by the same loader the dataset configs name."""

from __future__ import annotations

import importlib
import json
import sys
import textwrap
from pathlib import Path

import pytest
from hydra.utils import instantiate

import harness.data
from harness.core.types import Example
from harness.data import DatasetFormat, DatasetFormatError, formats, load_dataset, load_examples, register_format
from harness.data.formats import unregister_format

# The packaged formats in detection order: with layout="auto" the first whose detector matches wins.
PACKAGED = (
    "ragbench",
    "dpr",
    "expertqa",
    "musique",
    "ircot",
    "2wiki",
    "hotpotqa",
    "demo",
    "squad",
    "beir",
    "qasper",
    "quality",
    "narrativeqa",
)

TOY_MODULE = '''
"""A format that lives outside the package: one question per line, its passages in a list."""

from harness.core.types import Document, Example
from harness.data.formats import DatasetFormat, has_keys, register_format
from harness.data.records import doc_id_for, question_id


def parse_record(record, ctx, *, dataset, split, shout=False):
    qid = question_id(record, "qid", ctx)
    documents = tuple(
        Document(doc_id_for(qid, i), "", (text.upper() if shout else text,))
        for i, text in enumerate(ctx.get(record, "passages", list))
    )
    return Example(
        question_id=qid,
        question=ctx.text(record, "ask"),
        answers=(ctx.text(record, "reply"),),
        gold_doc_ids=tuple(documents[i].doc_id for i in record.get("gold", [])),
        documents=documents,
        hops=1,
        split=split,
        dataset=dataset,
    )


def skip_reason(record):
    return "without passages" if record.get("passages") == [] else None


FORMAT = register_format(
    DatasetFormat(
        layout="toyqa",
        looks="ToyQA: qid, ask, reply, passages",
        default_name="toyqa",
        parse=parse_record,
        id_field="qid",
        skip_reason=skip_reason,
        options=("shout",),
        detect_record=has_keys("qid", "ask", "reply", "passages"),
    )
)
'''

TOY_RECORDS = [
    {"qid": "t1", "ask": "Who?", "reply": "Ann", "passages": ["Ann did it.", "Bob did not."], "gold": [0]},
    {"qid": "t2", "ask": "Empty?", "reply": "Yes", "passages": []},
    {"qid": "t3", "ask": "Where?", "reply": "Rome", "passages": ["In Rome."], "gold": [0]},
]


@pytest.fixture
def toy_format(tmp_path, monkeypatch):
    """The toy format, registered by importing a module written outside the package."""
    (tmp_path / "toy_format_module.py").write_text(textwrap.dedent(TOY_MODULE), encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    module = importlib.import_module("toy_format_module")
    try:
        yield module.FORMAT
    finally:
        unregister_format("toyqa")
        sys.modules.pop("toy_format_module", None)


@pytest.fixture
def toy_file(tmp_path) -> Path:
    path = tmp_path / "toy_dev.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in TOY_RECORDS) + "\n", encoding="utf-8")
    return path


def _expected(split: str = "dev", dataset: str = "toyqa") -> list[Example]:
    from harness.core.types import Document

    return [
        Example(
            question_id="t1",
            question="Who?",
            answers=("Ann",),
            gold_doc_ids=("t1::0",),
            documents=(Document("t1::0", "", ("Ann did it.",)), Document("t1::1", "", ("Bob did not.",))),
            hops=1,
            split=split,
            dataset=dataset,
        ),
        Example(
            question_id="t3",
            question="Where?",
            answers=("Rome",),
            gold_doc_ids=("t3::0",),
            documents=(Document("t3::0", "", ("In Rome.",)),),
            hops=1,
            split=split,
            dataset=dataset,
        ),
    ]


@pytest.mark.parametrize("layout", ["toyqa", "auto"])
def test_a_format_registered_outside_the_package_loads_through_the_dataset_loader(toy_format, toy_file, layout, caplog):
    assert formats()["toyqa"] is toy_format and list(formats())[-1] == "toyqa"
    assert "toyqa" in harness.data.LAYOUTS
    with caplog.at_level("WARNING"):
        examples = load_dataset(toy_file, layout)
    assert examples == _expected()
    assert "skipped 1 of 3 records without passages" in caplog.text


def test_a_dataset_config_names_the_outside_format(toy_format, toy_file):
    config = {"_target_": "harness.data.load_dataset", "path": str(toy_file), "layout": "toyqa", "name": "toy"}
    config |= {"sample_size": 1, "seed": 0, "shout": True}
    (example,) = instantiate(config)
    assert example.dataset == "toy" and example.question_id in ("t1", "t3")
    assert all(s == s.upper() for d in example.documents for s in d.sentences)


def test_the_outside_format_keeps_its_options_and_checks_its_ids(toy_format, toy_file, tmp_path):
    with pytest.raises(ValueError, match="shout=True applies to the toyqa layout only, not 'hotpotqa'"):
        load_examples(toy_file, "hotpotqa", shout=True)
    with pytest.raises(ValueError, match="setting='fullwiki' applies to the hotpotqa layout only, not 'toyqa'"):
        load_examples(toy_file, "toyqa", setting="fullwiki")
    with pytest.raises(TypeError, match="unknown dataset option 'whisper'"):
        load_examples(toy_file, "toyqa", whisper=True)
    repeated = tmp_path / "toy_repeated.jsonl"
    repeated.write_text("\n".join(json.dumps(TOY_RECORDS[0]) for _ in range(2)), encoding="utf-8")
    with pytest.raises(DatasetFormatError, match="question id"):
        load_examples(repeated, "toyqa")


def test_registering_a_taken_name_is_an_error_naming_it(toy_format):
    with pytest.raises(ValueError, match="'toyqa' is already registered"):
        register_format(toy_format)
    with pytest.raises(ValueError, match="'hotpotqa' is already registered"):
        register_format(DatasetFormat(layout="hotpotqa", looks="x", default_name="x", parse=lambda *a, **k: None))


def test_a_format_record_is_refused_when_incomplete():
    with pytest.raises(ValueError, match="exactly one of parse"):
        DatasetFormat(layout="half", looks="x", default_name="x")
    with pytest.raises(ValueError, match="'looks'"):
        DatasetFormat(layout="half", looks="", default_name="x", parse=lambda *a, **k: None)
    with pytest.raises(ValueError, match="not a layout"):
        DatasetFormat(layout="auto", looks="x", default_name="x", parse=lambda *a, **k: None)


def test_a_format_without_a_default_name_names_its_examples_after_its_layout():
    unnamed = DatasetFormat(layout="toyqa", looks="x", parse=lambda *a, **k: None)
    assert unnamed.dataset_name(Path("toy.json"), {}) == "toyqa"
    named = DatasetFormat(layout="toyqa", looks="x", default_name=lambda path, options: path.stem, parse=print)
    assert named.dataset_name(Path("dev_toy.json"), {}) == "dev_toy"
    assert [formats()[layout].dataset_name(Path("x"), {}) for layout in ("expertqa", "ragbench", "musique")] == [
        "expertqa",
        "ragbench",
        "musique",
    ]


def test_the_packaged_formats_register_in_detection_order():
    assert tuple(formats())[: len(PACKAGED)] == PACKAGED
    assert harness.data.LAYOUTS[: len(PACKAGED) + 1] == ("auto", *PACKAGED)


@pytest.mark.parametrize("layout", PACKAGED)
def test_every_registered_format_has_every_field(layout):
    record = formats()[layout]
    assert isinstance(record, DatasetFormat) and record.layout == layout
    assert isinstance(record.looks, str) and record.looks
    assert isinstance(record.dataset_name(Path("some/folder"), {}), str) and record.dataset_name(Path("x"), {})
    assert record.default_split(Path("x_dev.json")) in ("dev", "test")
    assert (record.parse is None) != (record.load is None) and callable(record.parse or record.load)
    assert all(isinstance(option, str) for option in record.options)
    for hook in (record.skip_reason, record.check_options, record.detect_path, record.detect_record):
        assert hook is None or callable(hook)
    if record.parse is not None:
        assert callable(record.read)
        identity = record.record_identity()
        assert callable(identity.key) and identity.what and (identity.field or record.id_field)
    else:  # read whole: records are checked by the loader itself
        assert record.skip_reason is None and record.identity is None and record.detect_record is None
