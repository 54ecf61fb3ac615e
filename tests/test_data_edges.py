"""Input edges: records and file shapes that once loaded silently or failed with a misleading message."""

from __future__ import annotations

import json
import logging

import pytest

from harness.data import DatasetFormatError, load_examples
from harness.run.pipeline import k_exceeds_pools
from tests.conftest import make_pool
from tests.test_data_malformed import _hotpot, _musique


def test_musique_answerable_without_a_supporting_paragraph_is_refused(tmp_path):
    record = _musique("2hop__1")
    for paragraph in record["paragraphs"]:
        paragraph["is_supporting"] = False
    path = tmp_path / "musique.jsonl"
    path.write_text(json.dumps(_musique("2hop__0")) + "\n" + json.dumps(record) + "\n")
    with pytest.raises(DatasetFormatError) as caught:
        load_examples(path, "musique")
    error = caught.value
    assert (error.index, error.record_id, error.field) == (1, "2hop__1", "paragraphs")
    assert "is_supporting" in error.message and str(path) in str(error)


def test_musique_unanswerable_without_support_still_loads(tmp_path):
    record = {**_musique("2hop__1"), "answerable": False}
    for paragraph in record["paragraphs"]:
        paragraph["is_supporting"] = False
    path = tmp_path / "musique.jsonl"
    path.write_text(json.dumps(record) + "\n")
    (example,) = load_examples(path, "musique")
    assert example.gold_doc_ids == () and example.metadata["answerable"] is False


def test_pretty_printed_single_object_says_what_is_expected(tmp_path):
    path = tmp_path / "hotpot.json"
    path.write_text(json.dumps(_hotpot("q1"), indent=2))
    with pytest.raises(DatasetFormatError, match="expected a JSON list or JSON lines") as caught:
        load_examples(path, "hotpotqa")
    assert "one JSON object over" in caught.value.message


@pytest.mark.parametrize("indent", [None, 2])
def test_a_wrapped_list_names_its_key(tmp_path, indent):
    path = tmp_path / "hotpot.json"
    path.write_text(json.dumps({"data": [_hotpot("q1"), _hotpot("q2")]}, indent=indent))
    with pytest.raises(DatasetFormatError, match="expected a JSON list or JSON lines") as caught:
        load_examples(path, "hotpotqa")
    assert "'data' holds a list of 2 objects" in caught.value.message and caught.value.field == "data"


def test_one_compact_record_is_valid_json_lines(tmp_path):
    path = tmp_path / "hotpot.jsonl"
    path.write_text(json.dumps(_hotpot("q1")) + "\n")
    (example,) = load_examples(path, "hotpotqa")
    assert example.question_id == "q1"


def test_k_above_every_pool_is_named():
    pools = [make_pool(n_docs=10, seed=seed) for seed in range(3)]
    warning = k_exceeds_pools(1000, pools)
    assert warning is not None and "k=1000" in warning and "at most 10 candidates" in warning
    assert k_exceeds_pools(10, pools) is None and k_exceeds_pools(5, []) is None


def test_k_above_every_pool_is_logged_by_a_run(tmp_path, caplog):
    from harness.run.job import run
    from tests.conftest import compose_cfg

    cfg = compose_cfg(["dataset=demo", "k=1000", "read=false", "logger=none", f"paths.cache_dir={tmp_path / 'cache'}"])
    with caplog.at_level(logging.WARNING, logger="harness.run.pipeline"):
        run(cfg, tmp_path / "run")
    assert any("k=1000 exceeds every question's pool" in r.getMessage() for r in caplog.records)
