"""Invalid config values are reported before any model loads, one line each, exit status 2."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.run.config_check import ConfigError, allowed_top_level_keys, problems, validate
from tests.conftest import REPO, SHARED_DATA, compose_cfg


def composed(*overrides: str):
    return compose_cfg(overrides)


def only_problem(*overrides: str) -> str:
    found = problems(composed(*overrides))
    assert len(found) == 1, found
    assert "\n" not in found[0]
    return found[0]


def test_default_config_is_valid():
    validate(composed())
    validate(composed("perturb=inject", "perturb.rho=0", "dataset.sample_size=1", "budget=1", "k=1"))
    validate(composed("perturb=chunk_overlap", "perturb.overlap=0"))


@pytest.mark.parametrize(
    "overrides,key,value,allowed",
    [
        (["budget=0"], "budget", "0", ">= 1"),
        (["budget=-5"], "budget", "-5", ">= 1"),
        (["budget=12.5"], "budget", "12.5", "integer"),
        (["k=0"], "k", "0", ">= 1"),
        (["perturb=inject", "perturb.rho=1.01"], "perturb.rho", "1.01", "[0, 1]"),
        (["perturb=inject", "perturb.rho=-0.1"], "perturb.rho", "-0.1", "[0, 1]"),
        (["perturb=chunk_overlap", "perturb.overlap=1.0"], "perturb.overlap", "1.0", "[0, 1)"),
        (["perturb=chunk_overlap", "perturb.overlap=-0.25"], "perturb.overlap", "-0.25", "[0, 1)"),
        (["dataset.sample_size=0"], "dataset.sample_size", "0", ">= 1"),
        (["read_chunk=0"], "read_chunk", "0", ">= 1"),
        (["read=maybe"], "read", "'maybe'", "true or false"),
        (["diversifier=mmr", "diversifier.lambda_=2"], "diversifier.lambda_", "2", "[0, 1]"),
        (["diversifier=vendi", "diversifier.lambda_=-0.5"], "diversifier.lambda_", "-0.5", "[0, 1]"),
        (["diversifier=rule", "diversifier.inner.lambda_=1.5"], "diversifier.inner.lambda_", "1.5", "[0, 1]"),
        (["packer=mmr", "packer.relevance_weight=2"], "packer.relevance_weight", "2", "[0, 1]"),
        (["retriever.pool_size=-1"], "retriever.pool_size", "-1", ">= 1"),
        (["retriever.pool_size=0"], "retriever.pool_size", "0", ">= 1"),
        (["dataset.answer_scorer=trec"], "dataset.answer_scorer", "'trec'", "hotpotqa, squad, musique"),
    ],
)
def test_out_of_range_value_names_key_value_and_range(overrides, key, value, allowed):
    line = only_problem(*overrides)
    assert line.startswith(f"{key}={value} ") and allowed in line, line


def test_boundaries_are_allowed():
    assert problems(composed("perturb=inject", "perturb.rho=1")) == []
    assert problems(composed("perturb=chunk_overlap", "perturb.overlap=0.75")) == []
    assert problems(composed("dataset.sample_size=null")) == []
    assert (
        problems(composed("diversifier=mmr", "diversifier.lambda_=0", "packer=mmr", "packer.relevance_weight=1")) == []
    )
    assert problems(composed("retriever.pool_size=1")) == []


def test_unknown_top_level_key():
    line = only_problem("+budgt=5")
    assert "'budgt'" in line and "5" in line and "budget" in line  # the allowed keys are listed


def test_allowed_keys_follow_config_yaml(tmp_path):
    config = tmp_path / "config.yaml"
    config.write_text("defaults:\n  - dataset: demo\n  - override hydra/help: harness\nseed: 1\nextra: 2\n")
    assert allowed_top_level_keys(config) == {"dataset", "seed", "extra", "hydra"}


def test_missing_dataset_path(tmp_path):
    missing = tmp_path / "nope.json"
    line = only_problem("dataset=hotpotqa", f"dataset.path={missing}")
    assert line.startswith(f"dataset.path='{missing}' does not exist") and str(missing) in line
    existing = SHARED_DATA / "hotpotqa" / "hotpot_dev_distractor_v1_100.json"
    assert problems(composed("dataset=hotpotqa", f"dataset.path={existing}")) == []


def test_missing_alias_file(tmp_path):
    missing = tmp_path / "id_aliases.json"
    line = only_problem("dataset=2wikimultihopqa", f"dataset.aliases={missing}")
    assert line.startswith(f"dataset.aliases='{missing}' does not exist") and "id_aliases.json" in line
    missing.write_text('{"Q_id": "Q1", "aliases": ["One"], "demonyms": []}\n')
    assert problems(composed("dataset=2wikimultihopqa", f"dataset.aliases={missing}")) == []


def test_every_problem_is_reported_at_once():
    with pytest.raises(ConfigError) as caught:
        validate(composed("budget=0", "k=0", "+foo=1"))
    assert len(caught.value.problems) == 3


def harness(args: list[str], cwd: Path) -> tuple[subprocess.CompletedProcess, float]:
    env = {**os.environ, "WANDB_MODE": "disabled"}
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "harness", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    return done, time.perf_counter() - start


@pytest.mark.process
@pytest.mark.parametrize(
    "args,needle",
    [
        (["budget=0", "read=false"], "config error: budget=0 is out of range; allowed: an integer >= 1"),
        (["+unknown_key=3"], "config error: unknown top-level key 'unknown_key'"),
        (["diversifier=mmr", "diversifier.lambda_=2"], "config error: diversifier.lambda_=2 is out of range"),
        (["packer=mmr", "packer.relevance_weight=2"], "config error: packer.relevance_weight=2 is out of range"),
        (["retriever.pool_size=-1"], "config error: retriever.pool_size=-1 is out of range"),
    ],
)
def test_command_line_exits_2_fast_without_loading_models(tmp_path, args, needle):
    done, seconds = harness([*args, f"hydra.run.dir={tmp_path / 'run'}"], REPO)
    assert done.returncode == 2, done.stderr[-2000:]
    assert needle in done.stderr
    assert seconds < 5, f"took {seconds:.1f} s"
    assert not (tmp_path / "run" / "rows.journal.jsonl").exists()


@pytest.mark.process
def test_sweeps_group_found_from_any_directory(tmp_path):
    done, _ = harness(["+sweeps=smoke", "--cfg", "job"], tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    # smoke.yaml sets dataset.sample_size=3 and the logger to none
    assert "sample_size: 3" in done.stdout
    assert "logger:" not in done.stdout or "logger: {}" in done.stdout or "logger: null" in done.stdout
    hydra_cfg, _ = harness(["+sweeps=smoke", "--cfg", "hydra"], tmp_path)
    assert "budget: 64,96" in hydra_cfg.stdout
