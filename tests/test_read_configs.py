"""Every reader config instantiates with a minimal config, loading no weights."""

from __future__ import annotations

from pathlib import Path

import pytest
from hydra.utils import instantiate
from omegaconf import OmegaConf

from harness.backends.offline_models import ensure_offline_model
from harness.backends.precision import machine_dtype
from harness.read.base import PromptRequest, Reader
from harness.read.llama_cpp import LlamaCppReader
from harness.read.local import LocalReader
from harness.read.prompt import PromptTemplate

REPO = Path(__file__).resolve().parents[1]
CONF = REPO / "conf"
MODELS_DIR = REPO / ".cache/models"
READER_CONFIGS = sorted(p.stem for p in (CONF / "reader").glob("*.yaml"))
# Readers behind an HTTP server load no weights at all; tests/test_read_server.py covers them.
SERVER_READERS = {"openai_compat", "openai_compat_servers"}


@pytest.fixture(scope="session")
def smollm2_folder() -> Path:
    return ensure_offline_model("smollm2", MODELS_DIR / "SmolLM2-135M-Instruct")


def minimal_cfg(reader: str, cache_dir: Path):
    return OmegaConf.create(
        {
            "seed": 42,
            "paths": {"cache_dir": str(cache_dir), "models_dir": str(MODELS_DIR)},
            "prompt": OmegaConf.load(CONF / "prompt/default.yaml"),
            "reader": OmegaConf.load(CONF / "reader" / f"{reader}.yaml"),
        }
    )


def test_all_published_readers_have_a_config():
    assert set(READER_CONFIGS) >= {
        "smollm2_135m",
        "qwen2.5_3b",
        "qwen2.5_7b",
        "qwen2.5_7b_nf4",
        "qwen2.5_14b",
        "qwen2.5_32b",
        "falcon3_3b",
        "phi3.5_mini",
        "flan_t5_base",
    }


@pytest.mark.process
@pytest.mark.parametrize("reader_name", sorted(set(READER_CONFIGS) - SERVER_READERS))
def test_reader_config_instantiates_without_loading_weights(reader_name, tmp_path):
    reader = instantiate(minimal_cfg(reader_name, tmp_path).reader)
    assert isinstance(reader, LocalReader) and isinstance(reader, Reader)
    assert isinstance(reader.prompt, PromptTemplate)
    assert reader.prompt.instruction.startswith("Answer the question using the context.")
    assert reader.cache.path == tmp_path / "responses.sqlite"
    assert reader._module is None and reader._tokenizer is None
    backend_field = {"llama_cpp": "|backend=llama_cpp|gguf=", "vllm": "|backend=vllm|files="}.get(
        type(reader).backend, "|dtype="
    )
    assert reader.reader_id.startswith(reader.model_id + backend_field)


def test_published_settings(tmp_path):
    readers = {name: instantiate(minimal_cfg(name, tmp_path).reader) for name in READER_CONFIGS}
    default = readers["smollm2_135m"]
    # dtype auto: the machine's choice (tests/test_backends_precision.py covers both machines); row
    # decoding keeps answers batch-invariant in either.
    assert (default.batch_size, default.max_new_tokens, default.spec.dtype) == (8, 24, "auto")
    assert default.batch_invariant and default.decoding == "rows"
    assert ("|rows=8|cpu=" in default.reader_id) == (machine_dtype() != "float32")
    assert default.trainer_settings["accelerator"] == "cpu" and default.model_id == "offline:smollm2"
    # No reader config pins a thread count: null takes this job's share of the CPUs (harness.core.threads).
    assert all(getattr(r, "torch_threads", None) is None for r in readers.values())
    assert all(r.llama_cpp.n_threads is None for r in readers.values() if isinstance(r, LlamaCppReader))
    assert default.spec.pretrained == str(MODELS_DIR / "SmolLM2-135M-Instruct")
    for big in ("qwen2.5_14b", "qwen2.5_32b"):
        assert (readers[big].spec.quantization, readers[big].spec.device_map) == ("nf4", "auto")
    assert (
        readers["qwen2.5_7b_nf4"].spec.pretrained == readers["qwen2.5_7b"].spec.pretrained == "Qwen/Qwen2.5-7B-Instruct"
    )
    assert readers["qwen2.5_7b_nf4"].reader_id != readers["qwen2.5_7b"].reader_id
    assert readers["flan_t5_base"].num_beams == 4 and readers["flan_t5_base"].spec.pretrained == "google/flan-t5-base"
    assert readers["phi3.5_mini"].spec.pretrained == "microsoft/Phi-3.5-mini-instruct"
    assert readers["falcon3_3b"].spec.pretrained == "tiiuae/Falcon3-3B-Instruct"
    assert len({r.name for r in readers.values()}) == len(readers)


def test_default_reader_counts_tokens_before_any_weights_load(smollm2_folder, tmp_path):
    reader = instantiate(minimal_cfg("smollm2_135m", tmp_path).reader)
    prompt = reader.render(PromptRequest("Who wrote Hamlet?", "William Shakespeare wrote Hamlet."))
    assert prompt.startswith("<|im_start|>") and prompt.endswith("<|im_start|>assistant\n")
    assert reader.count_prompt_tokens(prompt) > reader.token_counter.count("William Shakespeare wrote Hamlet.")
    assert reader._module is None
