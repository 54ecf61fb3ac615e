"""Tokenizers loaded by their class name (``harness.backends.tokenizer_files``) against AutoTokenizer: the same
class, the same ids, offsets and chat-template renderings, on the offline models' real tokenizer files; and a
process that only counts prompts never imports torch."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from transformers import AutoTokenizer

from harness.backends.offline_models import ensure_offline_model
from harness.backends.tokenizer_files import direct_class_name, pretrained_tokenizer
from tests.conftest import REPO

MODELS = REPO / ".cache" / "models"
DEMO = REPO / "harness" / "data" / "demo" / "demo_multihop.json"
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja")


def demo_texts() -> list[str]:
    records = json.loads(DEMO.read_text(encoding="utf-8"))
    texts = [r["question"] for r in records]
    texts += [" ".join(map(str, passage.values())) for r in records for passage in r.get("passages", [])][:40]
    # Edges a byte-level BPE and its pre-tokenizer treat specially: runs of spaces, newlines, digits, accents,
    # CJK, emoji and the special tokens themselves written as text.
    return texts + [
        "  two  spaces\n\nand\ttabs ",
        "1234567 + 89 = 1234656",
        "Zoë Saldaña, Łódź, 東京, 🙂",
        "<|im_end|>",
    ]


@pytest.fixture(scope="module", params=["smollm2", "qwen2.5-coder-0.5b"])
def folder(request) -> Path:
    folder = (
        MODELS
        / {"smollm2": "SmolLM2-135M-Instruct", "qwen2.5-coder-0.5b": "Qwen2.5-Coder-0.5B-Instruct"}[request.param]
    )
    if request.param == "qwen2.5-coder-0.5b" and not (folder / "config.json").is_file():
        pytest.skip("the 0.5B folder is converted by `make setup`")
    return ensure_offline_model(request.param, folder, MODELS)


@pytest.fixture(scope="module", params=["model folder", "tokenizer only"])
def source(request, folder, tmp_path_factory) -> Path:
    """The model's folder, or its tokenizer files alone (what a llama.cpp reader's tokenizer folder holds)."""
    if request.param == "model folder":
        return folder
    target = tmp_path_factory.mktemp("models") / f"{folder.name}-tokenizer"
    target.mkdir()
    for name in TOKENIZER_FILES:
        if (folder / name).is_file():
            shutil.copy2(folder / name, target / name)
    return target


def test_the_class_named_in_the_files_is_the_one_autotokenizer_picks_and_encodes_alike(source):
    assert direct_class_name(source) is not None
    direct, auto = pretrained_tokenizer(source), AutoTokenizer.from_pretrained(str(source))
    assert type(direct) is type(auto)
    # The same state: the settings it was built with and the whole serialised tokenizer (normaliser, pre-tokeniser,
    # model, post-processor, added tokens).
    assert direct.init_kwargs == auto.init_kwargs
    assert direct.backend_tokenizer.to_str() == auto.backend_tokenizer.to_str()
    assert direct.special_tokens_map == auto.special_tokens_map
    assert (direct.pad_token, direct.eos_token, direct.bos_token) == (auto.pad_token, auto.eos_token, auto.bos_token)
    texts = demo_texts()
    for special in (False, True):
        for text in texts:
            mine = direct(text, add_special_tokens=special, return_offsets_mapping=True)
            theirs = auto(text, add_special_tokens=special, return_offsets_mapping=True)
            assert mine["input_ids"] == theirs["input_ids"], text
            assert mine["offset_mapping"] == theirs["offset_mapping"], text
    for text in texts[:12]:
        for messages in (
            [{"role": "user", "content": text}],
            [{"role": "system", "content": "Be brief."}, {"role": "user", "content": text}],
        ):
            rendered = direct.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
            assert rendered == auto.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
            assert direct(rendered)["input_ids"] == auto(rendered)["input_ids"]


def test_other_folders_and_remote_code_go_through_autotokenizer(folder, tmp_path):
    assert direct_class_name(folder, trust_remote_code=True) is None
    assert direct_class_name("Qwen/Qwen2.5-7B-Instruct") is None  # a hub id: AutoTokenizer resolves it
    for name in TOKENIZER_FILES:
        if (folder / name).is_file():
            shutil.copy2(folder / name, tmp_path / name)
    settings = json.loads((tmp_path / "tokenizer_config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "t5"}))
    assert direct_class_name(tmp_path) is None  # a model type whose resolution is not vouched for
    (tmp_path / "config.json").unlink()
    (tmp_path / "tokenizer_config.json").write_text(
        json.dumps({**settings, "auto_map": {"AutoTokenizer": ["x.Y", None]}})
    )
    assert direct_class_name(tmp_path) is None  # the folder's own code would decide


@pytest.mark.process
@pytest.mark.parametrize(
    ("reader", "kind"), [("qwen2.5_coder_0.5b_gguf", "LlamaCppReader"), ("smollm2_135m", "TransformersReader")]
)
def test_rendering_counting_and_keying_a_readers_prompts_imports_no_torch(reader, kind, tmp_path):
    """What a run that reads nothing (``read=false``) or finds every answer cached does with its reader: build it,
    render a prompt with its tokenizer, count it and key its answer. The demo's reader is llama.cpp's on CPUs
    without bf16 and transformers' with it; importing torch would cost every such run 2 to 4 s."""
    script = """
import sys
from hydra import compose, initialize_config_dir
from hydra.utils import instantiate
from harness.read.base import PromptRequest
with initialize_config_dir(config_dir=sys.argv[1], version_base=None):
    cfg = compose("config", overrides=["reader=" + sys.argv[3], "paths.models_dir=" + sys.argv[2]])
reader = instantiate(cfg.reader, _recursive_=False)
request = PromptRequest(question="Who wrote Hamlet?", context="Hamlet is a play by Shakespeare.")
prompt = reader.render(request)
assert reader.count_prompt_tokens(prompt) > 10, prompt
assert reader.token_counter.count("Hamlet is a play by Shakespeare.") > 3
assert len(reader.cache_key(request)) >= 32 and reader.reader_id
print(type(reader).__name__, "torch" in sys.modules)
"""
    proc = subprocess.run(
        [sys.executable, "-c", script, str(REPO / "conf"), str(MODELS), reader],
        cwd=REPO,
        env={**os.environ, "HF_HUB_OFFLINE": "1", "HARNESS_CACHE_DIR": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.split() == [kind, "False"], proc.stdout + proc.stderr[-2000:]
