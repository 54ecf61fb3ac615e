"""The dataset files a run names are read and checked with the config, before the heavy imports: a malformed
file, another benchmark's file or a loader option out of range is a one-line config error (exit 2)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from harness.run.config_check import problems
from harness.run.dataset_check import load_examples
from harness.run.secret_paths import secret_folder_problems
from tests.conftest import REPO, SHARED_DATA, compose_cfg
from tests.test_config_check import harness

HOTPOT = SHARED_DATA / "hotpotqa" / "hotpot_dev_distractor_v1_100.json"
HOTPOT_IRCOT = SHARED_DATA / "hotpotqa_ircot" / "hotpotqa_dev_subsampled_485.jsonl"
MUSIQUE = SHARED_DATA / "musique" / "musique_ans_dev_sample.jsonl"


def only_problem(*overrides: str) -> str:
    found = problems(compose_cfg(list(overrides)))
    assert len(found) == 1, found
    assert "\n" not in found[0]
    return found[0]


def ircot_musique_file(path: Path) -> Path:
    """The first MuSiQue sample record, written in IRCoT's processed format."""
    record = json.loads(MUSIQUE.read_text().splitlines()[0])
    contexts = [
        {"id": str(i), "title": p["title"], "paragraph_text": p["paragraph_text"], "is_supporting": p["is_supporting"]}
        for i, p in enumerate(record["paragraphs"])
    ]
    answers = [{"number": "", "date": {"day": "", "month": "", "year": ""}, "spans": [record["answer"]]}]
    line = {"question_id": record["id"], "question_text": record["question"], "answers_objects": answers}
    path.write_text(json.dumps({**line, "contexts": contexts}) + "\n")
    return path


def test_a_malformed_file_is_a_config_error_naming_file_record_and_field(tmp_path):
    bad = tmp_path / "hotpot.json"
    bad.write_text(json.dumps([{"_id": "q1", "question": "Q?"}]))
    line = only_problem("dataset=hotpotqa", f"dataset.path={bad}")
    assert line.startswith(f"dataset=hotpotqa: {bad}: record 0 (id 'q1'): field 'answer'"), line


def test_musique_ircot_refuses_the_hotpotqa_ircot_file_and_names_the_config_that_fits():
    line = only_problem("dataset=musique_ircot", f"dataset.path={HOTPOT_IRCOT}")
    assert "the id looks like hotpotqa's" in line and "source 'musique'" in line, line
    assert line.endswith("for this file use dataset=hotpotqa_fork_dev_subsampled or dataset=hotpotqa_ircot"), line


def test_an_ircot_file_of_another_source_names_that_source(tmp_path):
    path = ircot_musique_file(tmp_path / "test_subsampled.jsonl")
    line = only_problem("dataset=hotpotqa_ircot", f"dataset.path={path}")
    assert line.endswith("for this file use dataset=musique_ircot"), line
    assert problems(compose_cfg(["dataset=musique_ircot", f"dataset.path={path}"])) == []


@pytest.mark.parametrize(
    "config, path, fits",
    [
        ("musique", HOTPOT, "dataset=hotpotqa or dataset=hotpotqa_fullwiki or dataset=hotpotqa_fullwiki_amor"),
        ("hotpotqa", MUSIQUE, "dataset=musique or dataset=musique_migres"),
        ("musique", "ircot_musique", "dataset=musique_ircot"),
        ("hotpotqa", HOTPOT_IRCOT, "dataset=hotpotqa_fork_dev_subsampled or dataset=hotpotqa_ircot"),
    ],
)
def test_a_file_of_another_layout_is_refused_naming_the_config_that_fits(tmp_path, config, path, fits):
    if path == "ircot_musique":
        path = ircot_musique_file(tmp_path / "test_subsampled.jsonl")
    line = only_problem(f"dataset={config}", f"dataset.path={path}")
    assert "the file looks like the" in line and line.endswith(f"for this file use {fits}"), line


@pytest.mark.parametrize(
    "overrides, needle",
    [
        (["dataset=hotpotqa_fork_dev_subsampled", "dataset.source=hotpot"], "unknown IRCoT source 'hotpot'"),
        (["dataset=hotpotqa", "dataset.setting=full"], "unknown HotpotQA setting 'full'"),
        (["dataset=hotpotqa_fork_dev_subsampled", "dataset.layout=ircott"], "unknown layout 'ircott'"),
        (["dataset=hotpotqa", "dataset.layout=ircot"], "applies to the hotpotqa layout only"),
    ],
)
def test_loader_options_out_of_range_are_config_errors(overrides, needle):
    line = only_problem(*overrides)
    assert line.startswith(f"{overrides[0]}: ") and needle in line, line


def test_a_long_document_file_is_checked_without_its_tokenizer(tmp_path):
    bad = tmp_path / "qasper.json"
    bad.write_text(json.dumps({"p1": {"title": "T", "abstract": "A"}}))
    line = only_problem("dataset=qasper", f"dataset.path={bad}", f"dataset.models_dir={tmp_path / 'no-models'}")
    assert line.startswith(f"dataset=qasper: {bad}: record 0"), line


def test_the_checked_examples_are_the_ones_the_pipeline_loads():
    cfg = compose_cfg(["dataset=hotpotqa", f"dataset.path={HOTPOT}"])
    assert problems(cfg) == []
    first, key = load_examples(cfg.dataset)
    again, same_key = load_examples(compose_cfg(["dataset=hotpotqa", f"dataset.path={HOTPOT}"]).dataset)
    assert again is first and same_key == key and len(first) == 103


@pytest.mark.process
def test_the_check_imports_nothing_heavy(tmp_path):
    bad = tmp_path / "musique.jsonl"
    bad.write_text('{"id": "2hop__1_2", "paragraphs": []}\n')
    code = (
        "import sys; from tests.conftest import compose_cfg; from harness.run.config_check import problems; "
        f"print(problems(compose_cfg(['dataset=musique', 'dataset.path={bad}']))); "
        "print(sorted(m for m in ('torch', 'transformers', 'faiss', 'sentence_transformers') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    found, heavy = done.stdout.strip().splitlines()
    assert "record 0" in found and heavy == "[]", done.stdout


@pytest.mark.process
def test_command_line_reports_a_bad_dataset_as_a_config_error(tmp_path):
    done, seconds = harness(
        ["dataset=musique_ircot", f"dataset.path={HOTPOT_IRCOT}", f"hydra.run.dir={tmp_path}"], REPO
    )
    assert done.returncode == 2, done.stderr[-2000:]
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("config error: dataset=musique_ircot: ") and "dataset=hotpotqa_ircot" in line
    assert "Error executing job" not in done.stderr
    assert seconds < 10, f"took {seconds:.1f} s"


URL = "postgresql://harness:s3cret@127.0.0.1:1/cache"


@pytest.mark.process
def test_a_run_folder_from_override_dirname_holds_no_password(tmp_path):
    done, _ = harness(
        [f"hydra.run.dir={tmp_path}/" + "${hydra.job.override_dirname}", f"cache.url={URL}", "budget=0"], REPO
    )
    assert done.returncode == 2, done.stderr[-2000:]
    paths = [str(p) for p in tmp_path.rglob("*")]
    assert paths and not any("s3cret" in p for p in paths)
    assert any("harness:***@127.0.0.1" in p for p in paths)


@pytest.mark.process
def test_sweep_subfolders_from_override_dirname_hold_no_password(tmp_path):
    sweep = tmp_path / "sweep"
    subdir = "hydra.sweep.subdir=${hydra.job.override_dirname}"
    done, _ = harness(["-m", f"hydra.sweep.dir={sweep}", subdir, f"cache.url={URL}", "budget=0", "seed=1,2"], REPO)
    assert done.returncode == 1, done.stderr[-2000:]  # both jobs refuse budget=0
    jobs = [p for p in sweep.rglob("error.txt")]
    assert len(jobs) == 2 and not any("s3cret" in str(p) for p in sweep.rglob("*"))


def test_a_run_folder_that_holds_a_password_is_refused():
    (line,) = secret_folder_problems(f"/runs/cache.url={URL}")
    assert "s3cret" not in line and "holds a password" in line
    assert secret_folder_problems("/runs/2024-01-01/12-00-00") == []
