"""The files the published figures rest on are registered under their true sources, and the studies read them.

The replication studies' HotpotQA file is an IRCoT fork's ``dev_subsampled.jsonl``, not IRCoT's own
``test_subsampled.jsonl``: the packaged registry pins the fork's raw file at its commit, the studies name their 485
questions by a shipped id list, and IRCoT's configs read IRCoT's file whole. Each shipped id list selects, from the
samples beside the repository (the first lines of each registered file), exactly the questions it names.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from omegaconf import OmegaConf

from harness.data.fetch.registry import load_registry
from harness.run.dataset_check import load_examples
from tests.conftest import REPO, compose_cfg
from tests.helpers.file_server import FileServer
from tests.helpers.shared_data import SAMPLES, SHARED_DATA

FORK = "anlp-project-multihop/processed_data/hotpotqa/dev_subsampled.jsonl"
FORK_COMMIT = "11ba72982918286f4bc602fb0cd87b5e2a145860"
IDS = REPO / "harness" / "data" / "question_ids"


def _ids(name: str) -> list[str]:
    lines = (IDS / name).read_text(encoding="utf-8").splitlines()
    return [line for line in lines if line and not line.startswith("#")]


def test_the_packaged_registry_pins_the_forks_file_at_its_commit():
    (entry,) = load_registry()["hotpotqa_fork_dev_subsampled"].files
    assert entry.path == FORK
    assert entry.sources[0] == (
        f"https://raw.githubusercontent.com/xindili-cmu/anlp-project-multihop/{FORK_COMMIT}/"
        "processed_data/hotpotqa/dev_subsampled.jsonl"
    )
    assert entry.sha256 == "837a919903fedf521211c4271f168ad5458488198e9c4d967bf5f3a579525ce8"
    assert entry.size == 3_312_335


@pytest.mark.parametrize("config", ["hotpotqa_ircot", "musique_ircot", "2wikimultihopqa_ircot"])
def test_ircots_configs_read_ircots_own_file_whole(config):
    dataset = compose_cfg([f"dataset={config}"]).dataset
    assert dataset.path.endswith("/test_subsampled.jsonl") and "/ircot/processed_data/" in dataset.path
    assert OmegaConf.select(dataset, "question_ids_file", default=None) is None
    assert dataset.sample_size is None


@pytest.mark.parametrize(
    "sweep",
    [
        "replication_packing",
        "replication_reader_budgets",
        "replication_reader_ircot",
        "replication_ladder",
        "packing_ablation",
    ],
)
def test_the_hotpotqa_studies_read_the_forks_file_with_their_485_ids(sweep):
    dataset = compose_cfg([f"+sweeps={sweep}"]).dataset
    assert dataset.name == "hotpotqa_fork_dev_subsampled" and dataset.path.endswith(FORK)
    assert Path(dataset.question_ids_file) == IDS / "hotpotqa_fork_dev_subsampled_485.txt"
    assert len(set(_ids("hotpotqa_fork_dev_subsampled_485.txt"))) == 485


@pytest.mark.parametrize(
    ("config", "sample", "ids", "n"),
    [
        ("hotpotqa_fullwiki_amor", "hotpotqa_fullwiki/hotpot_fullwiki_dev_sample.jsonl", None, 250),
        ("musique_migres", "musique/musique_ans_dev_sample.jsonl", None, 100),
        ("2wikimultihopqa_migres", "2wikimultihopqa/2wiki_dev_sample.jsonl", None, 100),
        ("qasper_train_first10", "qasper/qasper-original-sample.json", None, 51),
        ("hotpotqa", "hotpotqa/hotpot_dev_distractor_v1_100.json", "hotpotqa_dev_distractor_first103.txt", 103),
        ("expertqa", "expertqa/expertqa_rand_test_sample.jsonl", "expertqa_rand_test_first100.txt", 66),
    ],
)
def test_each_id_list_keeps_exactly_the_questions_the_figures_rest_on(config, sample, ids, n):
    """Over the sample (the registered file's first lines), a set's config and id list keep every question the
    sample's loader keeps, in file order: so over the whole registered file they keep the same questions."""
    overrides = [f"dataset={config}", f"dataset.path={SHARED_DATA / sample}"]
    if ids:
        overrides.append(f"dataset.question_ids_file={IDS / ids}")
    dataset = compose_cfg(overrides).dataset
    kept, _ = load_examples(dataset)
    every, _ = load_examples(OmegaConf.merge(dataset, {"question_ids_file": None}))
    assert [e.question_id for e in kept] == [e.question_id for e in every]
    assert len(kept) == n


def test_the_trees_study_reads_qasper_train_and_quality_s_example_file():
    cfg = compose_cfg(["+sweeps=replication_trees"], return_hydra_config=True)
    assert cfg.hydra.sweeper.params.dataset == "qasper_train_first10,quality_example"
    registry = load_registry()
    assert "qasper/qasper-train-v0.3.json" in {f.path for f in registry["qasper"].files}
    (quality,) = registry["quality_example"].files
    assert quality.sha256 == hashlib.sha256((SHARED_DATA / SAMPLES[quality.path]).read_bytes()).hexdigest()


@pytest.mark.slow
def test_a_user_fetches_the_forks_file_and_the_first_study_job_reads_its_485_questions(tmp_path):
    """A stand-in for the fork's file (its 485 lines beside the repository) on a loopback server, a registry of
    the user's own giving the stand-in's hash; the fetch verifies it, and the first job of the packing study,
    launched as a user launches one job of a sweep, reads its 485 questions."""
    stand_in = SHARED_DATA / SAMPLES[FORK]
    served = tmp_path / "served" / "fork.jsonl"
    served.parent.mkdir()
    shutil.copyfile(stand_in, served)
    packaged = yaml.safe_load((REPO / "harness/data/registry.yaml").read_text(encoding="utf-8"))
    entry = packaged["datasets"]["hotpotqa_fork_dev_subsampled"]
    entry["files"][0] |= {
        "sources": ["http://127.0.0.1:9/unreachable.jsonl"],  # the mirror serves it, as a lab's would
        "sha256": hashlib.sha256(stand_in.read_bytes()).hexdigest(),
        "size": stand_in.stat().st_size,
    }
    registry = tmp_path / "registry.yaml"
    registry.write_text(yaml.safe_dump({"datasets": {"hotpotqa_fork_dev_subsampled": entry}}), encoding="utf-8")
    mirror = tmp_path / "mirror"
    (mirror / FORK).parent.mkdir(parents=True)
    shutil.copyfile(served, mirror / FORK)
    data = tmp_path / "data"
    env = {k: v for k, v in os.environ.items() if k != "HARNESS_DATA_MIRROR"} | {"HARNESS_DATA_DIR": str(data)}
    with FileServer(mirror) as server:
        fetched = subprocess.run(
            [sys.executable, "-m", "harness.data", "fetch", "hotpotqa_fork_dev_subsampled", "--registry",
             str(registry), "--mirror", server.url, "--quiet"],
            cwd=REPO, env=env, capture_output=True, text=True, timeout=60,
        )  # fmt: skip
    assert fetched.returncode == 0, fetched.stderr
    assert (data / FORK).read_bytes() == stand_in.read_bytes()
    # The job is the study's first, launched as a user launches it; the test stops it once it has loaded its
    # questions (retrieving and packing 485 questions takes minutes) and reads what it composed and printed.
    sweep = tmp_path / "sweep"
    command = [sys.executable, "-m", "harness", "-m", "+sweeps=replication_packing", "packer=packed", "budget=96",
               "seed=42", f"hydra.sweep.dir={sweep}"]  # fmt: skip
    job = subprocess.Popen(
        command, cwd=REPO, env=env | {"PYTHONUNBUFFERED": "1"}, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True,
    )  # fmt: skip
    printed: list[str] = []
    try:
        assert job.stdout is not None
        for line in job.stdout:
            printed.append(line)
            if " load " in f" {line}" or "error" in line.lower():  # the load stage's line, logged or printed
                break
    finally:
        job.terminate()
        job.wait(timeout=60)
    assert any("485 questions from hotpotqa_fork_dev_subsampled" in line for line in printed), "".join(printed)
    (composed,) = sweep.glob("*/.hydra/config.yaml")
    dataset = yaml.safe_load(composed.read_text(encoding="utf-8"))["dataset"]
    assert dataset["path"] == "${paths.data_dir}/" + FORK  # the data folder is the one the fetch filled (env)
    assert dataset["question_ids_file"].endswith("harness/data/question_ids/hotpotqa_fork_dev_subsampled_485.txt}")
