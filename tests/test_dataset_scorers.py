"""Dataset-specific scorers are chosen by the dataset config's ``scorers`` key, never by the dataset's name."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest
from hydra.utils import get_method
from omegaconf import OmegaConf

from harness.core.types import Example
from harness.data.formats import get_format
from harness.data.loader import load_dataset
from harness.metrics.longform import DATASET_SCORERS, check_scorers, dataset_scores
from harness.run.config_check import problems
from harness.run.pipeline import dataset_loader_config
from harness.run.rows import RowBuilder
from tests.conftest import compose_cfg

CONF = Path(__file__).resolve().parent.parent / "conf"


def composed(*overrides):
    return compose_cfg(overrides)


def qasper_example(dataset):
    return Example(
        "q1",
        "What is used?",
        ("BERT", "a transformer"),
        (),
        (),
        dataset=dataset,
        metadata={"answer_types": ("extractive", "abstractive")},
    )


def answer_columns(cfg, example, answer):
    """The answer columns of one question's row, without loading the run's models."""
    return RowBuilder(cfg).answer_columns(example, answer, None, {})


def test_a_qasper_run_scores_qasper_f1_because_its_config_says_so():
    cfg = composed("dataset=qasper")
    assert list(cfg.dataset.scorers) == ["qasper_f1"]
    columns = answer_columns(cfg, qasper_example("qasper"), "BERT")
    assert columns["qasper_f1"] == 1.0 and columns["qasper_answer_type"] == "extractive"
    assert columns["f1"] == 1.0


@pytest.mark.parametrize("name", ["qasper-foo", "qasper"])
def test_a_dataset_config_without_the_key_gets_no_dataset_scorer_whatever_its_name(name):
    cfg = composed("dataset=demo", f"dataset.name={name}")
    assert "scorers" not in cfg.dataset
    columns = answer_columns(cfg, qasper_example(name), "BERT")
    assert "qasper_f1" not in columns and columns["f1"] == 1.0


@pytest.mark.parametrize(
    "config, scorer", [("quality", "quality_accuracy"), ("narrativeqa", "bleu_rouge_meteor"), ("qasper", "qasper_f1")]
)
def test_the_key_is_kept_out_of_the_loader_arguments(config, scorer):
    node = OmegaConf.load(CONF / "dataset" / f"{config}.yaml")
    assert list(node.scorers) == [scorer]
    cfg = OmegaConf.create({"seed": 0, "paths": {"models_dir": "models", "data_dir": "data"}, "dataset": node})
    arguments = dataset_loader_config(cfg.dataset)
    assert "scorers" not in arguments and arguments["name"] == config and arguments["seed"] == 0
    parameters = inspect.signature(get_method(arguments["_target_"])).parameters
    accepted = set(parameters)
    if any(p.kind is p.VAR_KEYWORD for p in parameters.values()):
        # A loader that passes its options on: the common loader's arguments and the options its format takes.
        accepted |= set(inspect.signature(load_dataset).parameters) | set(get_format(config).options)
    assert set(arguments) - {"_target_"} <= accepted


def test_scorers_are_applied_in_the_order_named_and_an_unknown_one_is_refused():
    example = qasper_example("anything")
    assert dataset_scores("BERT", example) == {}
    assert dataset_scores("BERT", example, ["qasper_f1"])["qasper_f1"] == 1.0
    with pytest.raises(ValueError, match=r"unknown dataset scorer 'rouge'; known: qasper_f1, "):
        check_scorers(["rouge"])
    with pytest.raises(ValueError, match=r"dataset scorer 'no_such_package.length': cannot import 'no_such_package'"):
        check_scorers(["no_such_package.length"])
    with pytest.raises(TypeError, match="list of scorer names"):
        check_scorers("qasper_f1")
    assert set(DATASET_SCORERS) == {"qasper_f1", "quality_accuracy", "bleu_rouge_meteor"}


def test_a_scorer_named_by_its_import_path_needs_no_registration():
    # Any (prediction, example) -> {column: score} function, named by its import path like any user's.
    assert check_scorers(["harness.metrics.longform.qasper_f1_scores"]) == (
        "harness.metrics.longform.qasper_f1_scores",
    )
    scores = dataset_scores("BERT", qasper_example("anything"), ["harness.metrics.longform.qasper_f1_scores"])
    assert scores == dataset_scores("BERT", qasper_example("anything"), ["qasper_f1"])
    with pytest.raises(ValueError, match="unknown dataset scorer 'harness.metrics.longform.no_such_function'"):
        check_scorers(["harness.metrics.longform.no_such_function"])


def test_config_check_names_an_unknown_scorer_before_anything_loads():
    assert not [p for p in problems(composed("dataset=qasper")) if "scorers" in p]
    found = [p for p in problems(composed("dataset=qasper", "dataset.scorers=[qasper_f2]")) if "scorers" in p]
    assert len(found) == 1 and "qasper_f2" in found[0] and "bleu_rouge_meteor" in found[0]
