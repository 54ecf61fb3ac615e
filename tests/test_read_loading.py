"""Model loading: precisions, NF4 on CPU, encoder-decoder readers, offline-model folders."""

from __future__ import annotations

import collections
import copy
from pathlib import Path

import pytest
import torch

from harness.backends.loading import load_reader, load_tokenizer, quantization_config, resolve_dtype
from harness.backends.offline_models import ensure_offline_model, is_converted, offline_model_spec
from harness.read.base import PromptRequest
from harness.read.hf import TransformersReader
from harness.read.module import ReaderModule

# The folder the default reader config uses, so tests and runs share one conversion.
MODEL_FOLDER = Path(__file__).resolve().parents[1] / ".cache/models/SmolLM2-135M-Instruct"


@pytest.fixture(scope="session")
def smollm2_folder() -> Path:
    return ensure_offline_model("smollm2", MODEL_FOLDER)


def test_converted_folder_loads_as_a_plain_bf16_causal_lm(smollm2_folder):
    assert is_converted(smollm2_folder)
    model, tokenizer = load_reader(str(smollm2_folder), dtype="bfloat16")
    assert type(model).__name__ == "LlamaForCausalLM"
    assert model.dtype == torch.bfloat16 and not model.training
    assert getattr(model.config, "quantization_config", None) is None  # the GGUF quantizer is gone
    assert tokenizer.padding_side == "left" and tokenizer.pad_token_id == 2


def test_offline_model_resolves_its_folder_under_models_dir(smollm2_folder):
    tokenizer = load_tokenizer(None, offline_model="smollm2", models_dir=smollm2_folder.parent)
    assert Path(tokenizer.name_or_path) == smollm2_folder


@pytest.mark.parametrize("bad", ["bfloat", "int4"])
def test_unknown_dtype_is_named(bad):
    with pytest.raises(ValueError, match=bad):
        resolve_dtype(bad)


def test_unknown_quantization_is_named():
    with pytest.raises(ValueError, match="fp8"):
        quantization_config("fp8", torch.bfloat16)


def test_nf4_config_uses_double_quantization_and_the_compute_dtype():
    config = quantization_config("nf4", torch.float16)
    assert config.load_in_4bit and config.bnb_4bit_quant_type == "nf4"
    assert config.bnb_4bit_use_double_quant and config.bnb_4bit_compute_dtype == torch.float16


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"offline_model": "nope"}, "nope"),
        ({}, "pretrained"),
        ({"pretrained": "x", "quantization": "int4"}, "int4"),
        ({"pretrained": "x", "batch_size": 0}, "batch_size"),
        ({"pretrained": "x", "trainer": {"acelerator": "cpu"}}, "acelerator"),
        ({"pretrained": "x", "dtype": "half-ish"}, "half-ish"),
    ],
)
def test_reader_rejects_bad_settings_by_name(kwargs, message):
    with pytest.raises(ValueError, match=message):
        TransformersReader(name="r", **kwargs)


def test_unfinished_folders_are_not_mistaken_for_a_model(tmp_path):
    (tmp_path / "config.json").write_text("{}")
    assert not is_converted(tmp_path)
    with pytest.raises(FileExistsError, match=str(tmp_path)):
        ensure_offline_model("smollm2", tmp_path)
    with pytest.raises(ValueError, match="unknown offline model 'gpt'"):
        offline_model_spec("gpt")


@pytest.fixture(scope="module")
def tiny_t5_folder(smollm2_folder, tmp_path_factory) -> Path:
    """A randomly initialised two-layer T5 with SmolLM2's vocabulary: exercises the seq2seq path only
    (no seq2seq weights ship on PyPI), so its answers are noise and are not checked for content."""
    from transformers import T5Config, T5ForConditionalGeneration

    folder = tmp_path_factory.mktemp("tiny-t5")
    # A copy: the loaded tokenizer is shared by every reader of this process (read-only).
    tokenizer = copy.deepcopy(load_tokenizer(str(smollm2_folder)))
    tokenizer.chat_template = None  # a T5 reader renders plain-text prompts
    tokenizer.padding_side = "right"
    config = T5Config(
        vocab_size=len(tokenizer),
        d_model=32,
        d_kv=8,
        d_ff=64,
        num_layers=2,
        num_heads=4,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        decoder_start_token_id=tokenizer.pad_token_id,
    )
    torch.manual_seed(0)
    T5ForConditionalGeneration(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def test_encoder_decoder_reader_uses_seq2seq_generation(tiny_t5_folder, tmp_path):
    model, tokenizer = load_reader(str(tiny_t5_folder), dtype="float32")
    assert type(model).__name__ == "T5ForConditionalGeneration"
    assert tokenizer.padding_side == "right"  # only causal LMs need left padding

    reader = TransformersReader(
        name="t5",
        pretrained=str(tiny_t5_folder),
        dtype="float32",
        num_beams=3,
        max_new_tokens=5,
        cache_dir=tmp_path,
        show_progress=False,
        torch_threads=1,
    )
    request = PromptRequest("Who?", "Ann did.")
    prompt = reader.render(request)
    assert prompt.endswith("Question: Who?\nAnswer:") and reader.add_special_tokens
    answers = reader.answer([request, PromptRequest("Who?", "Ann did it."), request])
    assert len(answers) == 3 and all(isinstance(a, str) for a in answers) and answers[0] == answers[2]
    assert reader.generated == 2

    # The decoder output holds no prompt echo, so nothing is cut off its front.
    module: ReaderModule = reader.module
    assert module.is_encoder_decoder and module.generation_config.num_beams == 3
    encoded = tokenizer([prompt], return_tensors="pt")
    direct = model.generate(**encoded, generation_config=module.generation_config)
    assert module.generate([prompt]) == tokenizer.batch_decode(direct, skip_special_tokens=True)


@pytest.mark.slow
def test_nf4_reader_generates_on_cpu(smollm2_folder, tmp_path):
    # bitsandbytes NF4 on CPU: quantizing at load time takes ~15 s on an idle 2-core machine.
    reader = TransformersReader(
        name="smollm2-nf4",
        pretrained=str(smollm2_folder),
        offline_model="smollm2",
        quantization="nf4",
        max_new_tokens=8,
        cache_dir=tmp_path,
        show_progress=False,
        torch_threads=1,
    )
    assert "quant=nf4" in reader.reader_id
    answers = reader.answer([PromptRequest("What is the capital of France?", "Paris is the capital of France.")])
    assert answers[0].strip()
    layers = collections.Counter(type(m).__name__ for m in reader.module.generator.modules())
    assert layers["Linear4bit"] == 30 * 7  # every attention and MLP projection of the 30 layers
    assert reader.module.placed and reader.module.generator.device.type == "cpu"


@pytest.mark.slow
def test_conversion_writes_a_complete_folder_in_one_step(smollm2_folder, tmp_path):
    # Dequantizing the GGUF takes ~20 s on an idle 2-core machine.
    import json

    from safetensors.torch import load_file

    target = tmp_path / "models" / "smol"
    assert ensure_offline_model("smollm2", target) == target
    assert is_converted(target)
    assert [p.name for p in target.parent.iterdir()] == ["smol"]  # no staging folder left behind
    assert "quantization_config" not in json.loads((target / "config.json").read_text())
    fresh, cached = load_file(target / "model.safetensors"), load_file(smollm2_folder / "model.safetensors")
    assert fresh.keys() == cached.keys()
    assert all(torch.equal(fresh[k], cached[k]) for k in fresh)
    assert ensure_offline_model("smollm2", target) == target  # a second call finds it and converts nothing


def test_inside_a_conversion_a_gguf_file_is_parsed_once_and_the_library_is_restored_after():
    import gguf

    from harness.backends.offline_models import gguf_parsed_once, gguf_path

    source = gguf_path("smollm2", MODEL_FOLDER.parent)
    reader, name_map = gguf.GGUFReader, gguf.get_tensor_name_map
    with gguf_parsed_once():
        first = gguf.GGUFReader(source)
        assert gguf.GGUFReader(str(source)) is first and isinstance(first, reader)
        llama = gguf.MODEL_ARCH.LLAMA
        assert gguf.get_tensor_name_map(llama, 30) is gguf.get_tensor_name_map(llama, 30)
    assert (gguf.GGUFReader, gguf.get_tensor_name_map) == (reader, name_map)


def test_a_tokenizer_is_loaded_once_per_process_until_its_files_change(smollm2_folder, tmp_path):
    """Sweep jobs in one process build new readers; they share the tokenizer instead of parsing it again."""
    import shutil

    from harness.backends.llama_cpp import load_gguf_tokenizer

    first = load_tokenizer(str(smollm2_folder))
    assert load_tokenizer(str(smollm2_folder)) is first
    assert first.padding_side == "left" and first.pad_token is not None
    assert load_gguf_tokenizer(smollm2_folder) is not first  # another loader: its own memo entry
    assert load_gguf_tokenizer(smollm2_folder) is load_gguf_tokenizer(smollm2_folder)
    copy = shutil.copytree(smollm2_folder, tmp_path / "copy", ignore=shutil.ignore_patterns("*.safetensors", "*.bin"))
    before = load_tokenizer(str(copy))
    config = copy / "tokenizer_config.json"
    config.write_text(config.read_text())  # rewritten: a new modification time
    assert load_tokenizer(str(copy)) is not before
