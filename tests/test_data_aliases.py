"""2WikiMultihopQA's id_aliases.json: the aliases and demonyms of a record's answer_id are further gold answers."""

from __future__ import annotations

import json
import logging

import pytest
from hydra.utils import instantiate
from omegaconf import OmegaConf

from harness.data import load_dataset
from harness.data.aliases import read_aliases
from harness.data.errors import DatasetFormatError
from harness.metrics.answers import exact_match, f1_score
from harness.run.pipeline import dataset_loader_config
from tests.conftest import REPO, SHARED_DATA

TWOWIKI = SHARED_DATA / "2wikimultihopqa" / "2wiki_dev_sample.jsonl"
pytestmark = pytest.mark.skipif(not TWOWIKI.exists(), reason="shared 2WikiMultiHopQA sample not present")


def first_record() -> dict:
    return json.loads(TWOWIKI.read_text().splitlines()[0])


def alias_file(tmp_path, lines) -> str:
    path = tmp_path / "id_aliases.json"
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    return str(path)


def test_the_aliases_and_demonyms_of_the_answer_id_become_gold_answers(tmp_path):
    record = first_record()  # answer "Free Guy", answer_id Q38685497
    path = alias_file(
        tmp_path,
        [
            {"Q_id": record["answer_id"], "aliases": ["Free Guy (film)", "Free Guy"], "demonyms": ["Guyish"]},
            {"Q_id": "Q1", "aliases": ["unrelated"], "demonyms": []},
        ],
    )
    plain = {e.question_id: e for e in load_dataset(TWOWIKI, "2wiki")}
    aliased = {e.question_id: e for e in load_dataset(TWOWIKI, "2wiki", aliases=path)}
    example = aliased[record["_id"]]
    # The answer first, then the aliases and demonyms, the repeated "Free Guy" once.
    assert example.answers == ("Free Guy", "Free Guy (film)", "Guyish")
    assert example.metadata["answers_lower_bound"] is False
    assert plain[record["_id"]].metadata["answers_lower_bound"] is True
    # Scored as evaluate_v1.1 scores it: the best over answer and aliases.
    assert exact_match("Guyish", plain[record["_id"]].answers) == 0.0
    assert exact_match("Guyish", example.answers) == 1.0
    assert f1_score("free guy film", example.answers, "hotpotqa") == 1.0
    # Questions whose answer_id the file does not list keep their answers.
    others = [qid for qid in plain if qid != record["_id"]]
    assert all(aliased[q].answers == plain[q].answers for q in others)


def test_without_the_file_the_run_says_its_scores_are_a_lower_bound(caplog):
    with caplog.at_level(logging.WARNING, logger="harness.data.aliases"):
        examples = load_dataset(TWOWIKI, "2wiki")
    with_entity = [e for e in examples if e.metadata.get("answer_id")]
    assert len(with_entity) > 0.8 * len(examples)
    assert all(e.metadata["answers_lower_bound"] for e in with_entity)
    # A record without an answer_id has no aliases upstream either: nothing is missing.
    assert not any("answers_lower_bound" in e.metadata for e in examples if not e.metadata.get("answer_id"))
    assert "dataset.aliases is not set" in caplog.text and "lower bound" in caplog.text


def test_the_dataset_config_passes_dataset_aliases_to_the_loader(tmp_path, monkeypatch):
    record = first_record()
    path = alias_file(tmp_path, [{"Q_id": record["answer_id"], "aliases": ["FG"], "demonyms": []}])
    monkeypatch.chdir(REPO)
    node = OmegaConf.load(REPO / "conf" / "dataset" / "2wikimultihopqa.yaml")
    assert node.aliases is None and node.answer_scorer == "hotpotqa"
    node.aliases = path
    node.path = str(SHARED_DATA / "2wikimultihopqa" / "2wiki_dev_sample.jsonl")  # not under paths.data_dir here
    cfg = OmegaConf.create({"seed": 0, "dataset": node})
    examples = {e.question_id: e for e in instantiate(dataset_loader_config(cfg.dataset))}
    assert examples[record["_id"]].answers == ("Free Guy", "FG")


@pytest.mark.parametrize(
    "line, message",
    [
        ({"aliases": ["a"], "demonyms": []}, r"record 1: field 'Q_id': missing or empty entity id"),
        ({"Q_id": "Q2", "aliases": "a", "demonyms": []}, r"record 1 \(id 'Q2'\): field 'aliases': expected a list"),
        ({"Q_id": "Q2", "aliases": [], "demonyms": [3]}, r"field 'demonyms': entry 0 is int, not a string"),
    ],
)
def test_a_malformed_alias_file_names_the_file_the_record_and_the_field(tmp_path, line, message):
    path = alias_file(tmp_path, [{"Q_id": "Q1", "aliases": [], "demonyms": []}, line])
    with pytest.raises(DatasetFormatError, match=message) as error:
        read_aliases(path)
    assert "id_aliases.json" in str(error.value)


def test_a_truncated_alias_file_names_its_line_and_a_missing_one_its_key(tmp_path):
    path = tmp_path / "id_aliases.json"
    path.write_text('{"Q_id": "Q1", "aliases": [], "demonyms": []}\n{"Q_id": "Q2", "ali\n')
    with pytest.raises(DatasetFormatError, match=r"id_aliases.json.*line 2"):
        read_aliases(path)
    with pytest.raises(DatasetFormatError, match=r"dataset.aliases"):
        read_aliases(tmp_path / "absent.json")
