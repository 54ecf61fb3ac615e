"""Multi-process prediction: Lightning DDP (spawned, gloo on CPU) with two processes answers exactly what one
process answers (float32 and batch size 1, so numerics cannot depend on batch composition)."""

from __future__ import annotations

import pytest

from harness.read.reader import Reader
from tests.conftest import REPO

MODELS = REPO / ".cache" / "models"


def reader(tmp_path, name, **trainer):
    return Reader(name=name, offline_model="smollm2", pretrained=str(MODELS / "SmolLM2-135M-Instruct"),
                  models_dir=str(MODELS), dtype="float32", batch_size=1, max_new_tokens=12,
                  cache_dir=str(tmp_path / name), trainer={"accelerator": "cpu", **trainer}, show_progress=False)


@pytest.mark.slow
def test_two_process_ddp_matches_single_process(tmp_path):
    single = reader(tmp_path, "single", devices=1)
    prompts = [single.render_prompt(f"Who founded company {c}?", f"Company {c} was founded by Ada {c}son in 19{i}0.")
               for i, c in enumerate("ABCDE")]
    expected = single.answer(prompts)
    ddp = reader(tmp_path, "ddp", devices=2, strategy="ddp_spawn")
    assert ddp.answer(prompts) == expected
    assert ddp.generated == 5
