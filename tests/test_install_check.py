"""What is installed, checked before anything loads: the floors of pyproject.toml, hub kernels off unless asked
(and refused offline when none is cached), each a one-line config error with exit status 2."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from harness.backends.loading import ModelSpec
from harness.read.hf import TransformersReader
from harness.run.config_check import problems
from harness.run.install_check import declared_floors, kernels_problems, version_problems
from tests.conftest import REPO, compose_cfg

MODELS = REPO / ".cache" / "models"


def test_the_floors_are_the_versions_this_suite_runs_on():
    floors = declared_floors()
    assert set(floors) == {
        "torch",
        "transformers",
        "accelerate",
        "bitsandbytes",
        "pytorch-lightning",
        "lightning-fabric",
    }
    assert version_problems() == []  # the installed versions meet them
    assert str(floors["transformers"].specifier) == ">=5.25.0"


def test_a_version_below_its_floor_is_one_line_naming_package_version_and_floor():
    lines = version_problems({"transformers": "5.17.0", "torch": "2.11.0+cu130", "accelerate": None})
    assert lines == [
        "torch 2.11.0+cu130 is installed; the harness needs torch==2.13.0 (the version its tests passed on): "
        "`make setup` installs it",
        "transformers 5.17.0 is installed; the harness needs transformers>=5.25.0 (the oldest version its tests "
        "passed on): `make setup` installs it",
        "accelerate is not installed; the harness needs accelerate>=1.16.0 (`make setup` installs it)",
    ]
    assert version_problems({"torch": "2.13.0+cu130"}) == []  # a CUDA build of the same release


@pytest.mark.process
def test_the_command_line_stops_on_an_old_transformers_before_anything_loads(tmp_path):
    # A distribution found first on the path is the one importlib.metadata reports: an older transformers.
    fake = tmp_path / "transformers-5.17.0.dist-info"
    fake.mkdir()
    (fake / "METADATA").write_text("Metadata-Version: 2.1\nName: transformers\nVersion: 5.17.0\n")
    done = subprocess.run(
        [sys.executable, "-m", "harness", "read=false", "logger=none", f"hydra.run.dir={tmp_path / 'run'}"],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=80,
    )
    assert done.returncode == 2, done.stderr[-2000:]
    assert "transformers 5.17.0 is installed; the harness needs transformers>=5.25.0" in done.stderr
    assert not (tmp_path / "run" / "rows.parquet").exists()


def test_hub_kernels_asked_for_offline_without_a_cached_one_are_refused(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    asked = compose_cfg(["reader=smollm2_135m", "+reader.kernels=true"])
    (line,) = kernels_problems(asked, cache=tmp_path)
    assert line.startswith("reader.kernels=true asks for transformers' hub kernels")
    assert line in problems(asked)
    (tmp_path / "models--kernels-community--rotary").mkdir()
    assert kernels_problems(asked, cache=tmp_path) == []
    assert kernels_problems(compose_cfg(["reader=smollm2_135m"]), cache=tmp_path / "empty") == []


def test_a_reader_loads_without_hub_kernels_unless_asked_and_its_id_says_when():
    spec = ModelSpec(offline_model="smollm2", pretrained=str(MODELS / "SmolLM2-135M-Instruct"), models_dir=str(MODELS))
    model, _ = spec.load()
    assert model.use_kernels is False  # transformers turns them on when a load does not say
    plain = TransformersReader(name="s", offline_model="smollm2", models_dir=str(MODELS), dtype="bfloat16")
    hub = TransformersReader(name="s", offline_model="smollm2", models_dir=str(MODELS), dtype="bfloat16", kernels=True)
    assert "kernels" not in plain.reader_id
    assert hub.reader_id == plain.reader_id.replace("|max_new_tokens=24", "|max_new_tokens=24|kernels=hub")
