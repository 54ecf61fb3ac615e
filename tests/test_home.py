"""A run that cannot find an offline model says which folder it looked in and why, and makes nothing there."""

from __future__ import annotations

import pytest

from harness.backends.offline_models import ensure_offline_model, ensure_offline_tokenizer
from harness.core.home import harness_home
from tests.conftest import REPO


def test_the_home_is_the_checkout_that_holds_the_package():
    assert harness_home() == REPO


@pytest.mark.parametrize("ensure", [ensure_offline_model, ensure_offline_tokenizer])
def test_a_missing_model_names_its_folder_s_origin_and_leaves_no_folder(tmp_path, monkeypatch, ensure):
    models = tmp_path / "models"
    monkeypatch.setenv("HARNESS_MODELS_DIR", str(models))
    with pytest.raises(FileNotFoundError) as missing:
        ensure("qwen2.5-coder-0.5b", models_dir=models)
    assert f"models folder {models} (from HARNESS_MODELS_DIR)" in str(missing.value)
    assert not models.exists()  # the old error left an empty folder behind that looked like a broken setup


def test_a_folder_named_in_the_config_is_named_as_such(tmp_path, monkeypatch):
    monkeypatch.delenv("HARNESS_MODELS_DIR", raising=False)
    with pytest.raises(FileNotFoundError, match=r"\(paths\.models_dir; point it, or HARNESS_MODELS_DIR, at"):
        ensure_offline_model("qwen2.5-coder-0.5b", models_dir=tmp_path / "elsewhere")
