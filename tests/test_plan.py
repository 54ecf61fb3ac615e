"""The GPU memory plan (harness/plan/): GPU lists, packaged configs, KV cache, placements and the command line."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.plan import GpuSpec, MemoryPlan, model_config_path, parse_gpus, plan_reader
from harness.plan.cli import compose_reader, ladder_readers, ladder_table
from harness.plan.configs import PACKAGED_DIR, packaged_hub_ids
from harness.plan.gpus import parse_gpu_groups
from harness.plan.params import model_facts
from harness.plan.weights import Precision, nf4_linear_bytes, weight_bytes

REPO = Path(__file__).resolve().parents[1]
GIB = 2**30

# Parameter counts published on each model card (Hugging Face's safetensors metadata), in billions.
PUBLISHED = {
    "Qwen/Qwen2.5-3B-Instruct": 3.09,
    "Qwen/Qwen2.5-7B-Instruct": 7.62,
    "Qwen/Qwen2.5-14B-Instruct": 14.8,
    "Qwen/Qwen2.5-32B-Instruct": 32.8,
    "tiiuae/Falcon3-3B-Instruct": 3.23,
    "microsoft/Phi-3.5-mini-instruct": 3.82,
}


@pytest.fixture
def reader(tmp_path):
    """A reader config composed as a run composes it, with the plan's count cache under ``tmp_path``."""

    def compose(name: str, *overrides: str) -> dict:
        config, _ = compose_reader([f"reader={name}", f"paths.cache_dir={tmp_path}", *overrides])
        return config

    return compose


# -- GPU lists -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "sizes"),
    [
        ("4x24GiB", [24 * GIB] * 4),
        ("80GiB", [80 * GIB]),
        ("80GB", [80 * 10**9]),
        ("2x24GiB,1x40GiB", [24 * GIB, 24 * GIB, 40 * GIB]),
        (" 2 x 24 GiB , 40gib ", [24 * GIB, 24 * GIB, 40 * GIB]),
        ("1.5TB", [1_500_000_000_000]),
        ("512MiB", [512 * 2**20]),
    ],
)
def test_parse_gpus_reads_counts_and_exact_units(text, sizes):
    assert [g.memory_bytes for g in parse_gpus(text)] == sizes


def test_gb_is_decimal_and_gib_binary():
    (gb,) = parse_gpus("24GB")
    (gib,) = parse_gpus("24GiB")
    assert gb.memory_bytes == 24_000_000_000 and gib.memory_bytes == 24 * 1024**3


def test_parse_gpus_reads_a_compute_capability():
    assert parse_gpus("2x16GiB@7.5")[0].capability == (7, 5)
    assert parse_gpus("24GiB@sm86")[0].capability == (8, 6)
    assert parse_gpus("24GiB")[0].capability is None


@pytest.mark.parametrize("text", ["", "24", "24G", "x24GiB", "4x", "0x24GiB", "4x24GiB,", "24GiB;40GiB", "big"])
def test_parse_gpus_refuses_bad_lists_naming_the_text(text):
    with pytest.raises(ValueError, match="cannot read GPU list") as error:
        parse_gpus(text)
    assert repr(text) in str(error.value)


# -- packaged configs ------------------------------------------------------------------------------------------


def test_every_ladder_model_has_a_packaged_config():
    for size in ("3B", "7B", "14B", "32B"):
        for suffix in ("", "-AWQ"):
            assert f"Qwen/Qwen2.5-{size}-Instruct{suffix}" in packaged_hub_ids()
    assert {"tiiuae/Falcon3-3B-Instruct", "microsoft/Phi-3.5-mini-instruct"} <= set(packaged_hub_ids())


@pytest.mark.parametrize("hub_id", sorted(packaged_hub_ids()))
def test_packaged_config_counts_the_published_parameters(hub_id):
    published = PUBLISHED[hub_id.removesuffix("-AWQ")]
    counted = model_facts(PACKAGED_DIR / f"{hub_id.replace('/', '__')}.json").params
    assert abs(counted / 1e9 - published) / published < 0.01, (hub_id, counted)


def test_qwen_facts_match_the_published_architecture():
    facts = model_facts(model_config_path("Qwen/Qwen2.5-7B-Instruct"))
    assert (facts.hidden_size, facts.intermediate_size, facts.num_layers) == (3584, 18944, 28)
    assert (facts.num_heads, facts.num_kv_heads, facts.head_dim, facts.vocab_size) == (28, 4, 128, 152064)
    assert not facts.tied_embeddings and facts.max_positions == 32768
    assert any(p.name.endswith("q_proj.bias") for b in facts.blocks for p in b.params)  # Qwen2's q/k/v bias
    three = model_facts(model_config_path("Qwen/Qwen2.5-3B-Instruct"))
    assert three.tied_embeddings and three.vocab_size == 151936
    assert "lm_head" not in {b.name for b in three.blocks}  # tied: stored once, in the embedding
    awq = model_facts(model_config_path("Qwen/Qwen2.5-32B-Instruct-AWQ")).quantization_config
    assert awq == {
        "bits": 4,
        "group_size": 128,
        "modules_to_not_convert": None,
        "quant_method": "awq",
        "version": "gemm",
        "zero_point": True,
    }


def test_bitsandbytes_leaves_the_output_embedding_unquantized():
    facts = model_facts(model_config_path("Qwen/Qwen2.5-7B-Instruct"))
    quantized = {p.name for b in facts.blocks for p in b.params if p.quantized}
    assert "lm_head.weight" not in quantized and "model.embed_tokens.weight" not in quantized
    assert "model.layers.0.mlp.down_proj.weight" in quantized
    assert not any(name.endswith(".bias") for name in quantized)


def test_model_config_path_finds_folders_packaged_copies_and_the_hub_cache(tmp_path, monkeypatch):
    assert model_config_path("Qwen/Qwen2.5-7B-Instruct") == PACKAGED_DIR / "Qwen__Qwen2.5-7B-Instruct.json"
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    assert model_config_path(str(folder)) == folder / "config.json"
    snapshot = tmp_path / "hub" / "models--acme--tiny" / "snapshots" / "abc123"
    snapshot.mkdir(parents=True)
    (snapshot / "config.json").write_text("{}")
    (tmp_path / "hub" / "models--acme--tiny" / "refs").mkdir()
    (tmp_path / "hub" / "models--acme--tiny" / "refs" / "main").write_text("abc123")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    assert model_config_path("acme/tiny") == snapshot / "config.json"
    assert model_config_path("acme/absent") is None
    assert model_config_path(str(tmp_path / "nowhere")) is None


def test_counts_are_kept_on_disk_and_a_damaged_entry_is_counted_again(tmp_path):
    from harness.plan.facts_cache import cached_model_facts, entry_path

    config = model_config_path("Qwen/Qwen2.5-3B-Instruct")
    counted = cached_model_facts(config, tmp_path)
    entry = entry_path(tmp_path, config)
    assert entry.is_file()
    assert cached_model_facts(config, tmp_path) == counted
    entry.write_text('{"blocks": ')  # a write cut short
    assert cached_model_facts(config, tmp_path) == counted
    assert cached_model_facts(config, None) == counted


# -- weights and KV cache --------------------------------------------------------------------------------------


def test_kv_bytes_per_token_of_qwen_7b_in_bf16(reader):
    plan = plan_reader(reader("qwen2.5_7b"), parse_gpus("80GiB"))
    # 2 (K and V) x 28 layers x 4 KV heads x 128 head_dim x 2 bytes
    assert plan.kv_bytes_per_token == 2 * 28 * 4 * 128 * 2 == 57344
    assert plan.kv_bytes == 57344 * (2048 + 24) * 16  # batch_size 16, prompt + max_new_tokens


# The device's peak use on one H200 (torch 2.11, random-weight models built from the packaged configs, bf16,
# 16 prompts x 2048 tokens prefilled), in GB: what the plan's per-GPU figure must cover.
MEASURED_H200_PEAK_GB = {"qwen2.5_7b": 24.47, "qwen2.5_14b": 42.55, "qwen2.5_32b": 83.82}


@pytest.mark.parametrize("name", sorted(MEASURED_H200_PEAK_GB))
def test_the_per_gpu_plan_covers_what_the_device_used(reader, name):
    config = reader(name, "reader.quantization=null", "reader.dtype=bfloat16", "reader.batch_size=16")
    plan = plan_reader(config, parse_gpus("141GiB"), prompt_tokens=2048)
    assert plan.fits and plan.gpus_used == 1
    planned_gb = plan.per_gpu_bytes[0] / 1e9
    assert MEASURED_H200_PEAK_GB[name] <= planned_gb <= MEASURED_H200_PEAK_GB[name] * 1.08


def test_weight_bytes_by_precision():
    facts = model_facts(model_config_path("Qwen/Qwen2.5-7B-Instruct"))
    bf16 = weight_bytes(facts, Precision("bfloat16"))
    assert weight_bytes(facts, Precision("float32")) == 2 * bf16 - facts.buffer_bytes
    nf4 = weight_bytes(facts, Precision("bfloat16", "nf4"))
    int8 = weight_bytes(facts, Precision("bfloat16", "int8"))
    awq = weight_bytes(facts, Precision("float16", "awq"))
    assert nf4 < awq < int8 < bf16
    # 0.5 byte per quantized weight plus its 8-bit absmax per 64, the rest in bf16
    kept = 2 * (facts.params - facts.quantizable_params)
    assert 0.5 * facts.quantizable_params + kept < nf4 < 0.53 * facts.quantizable_params + kept
    assert nf4_linear_bytes(4096, 4096) == 4096 * 4096 // 2 + 4096 * 4096 // 64 + 4 * 4096 * 4096 // 64 // 256 + 1092


def test_dtype_auto_is_float16_below_ampere(reader):
    config = reader("qwen2.5_7b_vllm")
    assert plan_reader(config, parse_gpus("80GiB@8.0")).precision == "bfloat16"
    assert plan_reader(config, parse_gpus("32GiB@7.0")).precision == "float16"
    assert plan_reader(config, parse_gpus("80GiB")).precision == "bfloat16"  # unknown capability


# -- placements ------------------------------------------------------------------------------------------------


def test_32b_bf16_does_not_fit_one_24gib_gpu_and_names_what_would(reader):
    plan = plan_reader(
        reader("qwen2.5_32b", "reader.quantization=null"), parse_gpus("24GiB"), label="reader=qwen2.5_32b"
    )
    assert not plan.fits
    assert abs(plan.weight_bytes / GIB - 61.0) < 0.1
    assert "\n" not in plan.problem and plan.problem.startswith("reader=qwen2.5_32b: bfloat16 weights 61.0 GiB")
    assert "one 24 GiB GPU" in plan.problem
    assert "reader.quantization=nf4" in plan.suggestion or "device_map over" in plan.suggestion
    assert plan.suggestion in plan.problem


def test_32b_nf4_with_device_map_fits_two_24gib_gpus(reader):
    plan = plan_reader(reader("qwen2.5_32b"), parse_gpus("2x24GiB"))
    assert plan.fits and plan.problem is None
    assert plan.precision.startswith("nf4")
    assert 1 <= plan.gpus_used <= 2 and len(plan.per_gpu_bytes) == plan.gpus_used
    assert all(b <= 24 * GIB for b in plan.per_gpu_bytes)
    assert 17 * GIB < plan.weight_bytes < 19 * GIB


def test_device_map_auto_spreads_over_every_gpu_and_sequential_over_the_fewest(reader):
    config = reader("qwen2.5_32b", "reader.quantization=null", "reader.batch_size=1")
    plan = plan_reader(config, parse_gpus("8x24GiB"))
    # Balanced over every GPU the job sees: total / 8 plus a buffer of 1.25 x the embedding on each but the last,
    # which the first seven fill.
    assert plan.fits and plan.gpus_used == 7
    assert plan.placement == "device_map auto over 7 x 24 GiB"
    assert sum(plan.per_gpu_bytes) > plan.weight_bytes
    # Sequential fills each GPU to its free memory, leaving none for the KV cache, unless max_memory says less.
    full = plan_reader({**config, "device_map": "sequential"}, parse_gpus("8x24GiB"))
    assert not full.fits and full.suggestion and "reader.device_map=auto over 8 x 24 GiB" in full.suggestion
    sequential = plan_reader({**config, "device_map": "sequential", "max_memory": ["16GiB"] * 8}, parse_gpus("8x24GiB"))
    assert sequential.fits and 3 <= sequential.gpus_used < plan.gpus_used
    assert (
        sequential.placement == f"device_map sequential over {sequential.gpus_used} x 24 GiB within reader.max_memory"
    )
    assert sorted(set(sequential.device_map.values())) == list(range(sequential.gpus_used))


def test_vllm_tensor_parallel_4_of_32b_bf16_fits_four_24gib_gpus(reader):
    config = reader(
        "qwen2.5_32b_vllm",
        "reader.pretrained=Qwen/Qwen2.5-32B-Instruct",
        "reader.dtype=bfloat16",
        "reader.vllm.quantization=null",
        "reader.vllm.tensor_parallel_size=4",
    )
    plan = plan_reader(config, parse_gpus("4x24GiB"))
    assert plan.fits and plan.gpus_used == 4
    assert 15.0 < plan.weight_bytes / 4 / GIB < 15.5  # ~15.3 GiB of weights per GPU
    assert all(b <= 0.9 * 24 * GIB for b in plan.per_gpu_bytes)
    assert plan.gpu_capacity == [int(0.9 * 24 * GIB)] * 4


def test_lightning_replicas_each_hold_a_whole_copy(reader):
    plan = plan_reader(reader("qwen2.5_7b", "reader.trainer.devices=4"), parse_gpus("4x80GiB"))
    assert plan.fits and plan.gpus_used == 4 and len(set(plan.per_gpu_bytes)) == 1
    short = plan_reader(reader("qwen2.5_7b", "reader.trainer.devices=4"), parse_gpus("2x80GiB"))
    assert not short.fits and "reader.trainer.devices=4 needs 4 GPUs, 2 given" in short.problem
    assert short.suggestion == "reader.trainer.devices=2"


def test_vllm_reader_needing_more_gpus_than_given(reader):
    config = reader("qwen2.5_14b_vllm", "reader.vllm.tensor_parallel_size=2")
    plan = plan_reader(config, parse_gpus("80GiB"), label="reader=qwen2.5_14b_vllm")
    assert not plan.fits
    assert "tensor_parallel_size=2 x data_parallel_size=1 needs 2 GPUs, 1 given" in plan.problem
    assert "reader.vllm.tensor_parallel_size=1" in plan.suggestion


def test_vllm_awq_needs_an_awq_checkpoint(reader):
    config = reader("qwen2.5_32b_vllm", "reader.pretrained=Qwen/Qwen2.5-32B-Instruct")
    with pytest.raises(ValueError, match="reader.vllm.quantization=awq needs a checkpoint quantized with AWQ"):
        plan_reader(config, parse_gpus("80GiB"))


def test_a_reader_without_gpu_plan_is_refused(reader):
    with pytest.raises(ValueError, match="no GPU plan for reader harness.read.llama_cpp.LlamaCppReader"):
        plan_reader(reader("smollm2_135m_gguf"), parse_gpus("24GiB"))


def test_plan_lines_form_a_table(reader):
    plan = plan_reader(reader("qwen2.5_7b"), [GpuSpec("A100", 80 * GIB, (8, 0))])
    assert isinstance(plan, MemoryPlan)
    lines = plan.lines()
    assert lines[0].startswith("reader ") and any(line.startswith("GPU 0 ") and "A100" in line for line in lines)
    start = len("activations  ")  # the longest name and two spaces: every value starts in that column
    assert all(line[start - 2 : start] == "  " and line[start] != " " for line in lines)


# -- command line ----------------------------------------------------------------------------------------------


def _cli(*args: str, cache_dir: Path) -> tuple[subprocess.CompletedProcess, float]:
    env = {**os.environ, "HARNESS_CACHE_DIR": str(cache_dir)}
    start = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "harness.plan", *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=120
    )
    return done, time.monotonic() - start


@pytest.mark.process
def test_cli_exits_2_with_one_line_for_a_plan_that_does_not_fit(tmp_path):
    args = ("reader=qwen2.5_32b", "reader.quantization=null", "--gpus", "24GiB")
    cold, cold_s = _cli(*args, cache_dir=tmp_path)
    assert cold.returncode == 2, cold.stderr
    assert len(cold.stderr.strip().splitlines()) == 1
    assert cold.stderr.startswith("reader=qwen2.5_32b: bfloat16 weights 61.0 GiB") and "nf4" in cold.stderr
    assert "fits         no" in cold.stdout
    assert cold_s < 60  # counted on the meta device: seconds, never a load of weights
    # Counted once, the plan needs neither torch nor transformers again.
    warm, warm_s = _cli(*args, cache_dir=tmp_path)
    assert warm.returncode == 2 and warm.stderr == cold.stderr
    assert warm_s < 15


@pytest.mark.process
def test_cli_exits_0_when_the_plan_fits(cache_with_shared_plan):
    done, _ = _cli("reader=qwen2.5_7b", "--gpus", "80GiB", cache_dir=cache_with_shared_plan)
    assert done.returncode == 0 and done.stderr == ""
    assert "fits         yes" in done.stdout


@pytest.mark.process
def test_cli_refuses_a_bad_gpu_list(cache_with_shared_plan):
    done, _ = _cli("reader=qwen2.5_7b", "--gpus", "24", cache_dir=cache_with_shared_plan)
    assert done.returncode == 1 and "cannot read GPU list '24'" in done.stderr


def test_ladder_lists_every_gpu_reader():
    names = ladder_readers()
    assert {"qwen2.5_3b", "qwen2.5_7b", "qwen2.5_14b", "qwen2.5_32b", "qwen2.5_32b_vllm"} <= set(names)
    assert names[-2:] == ["falcon3_3b", "phi3.5_mini"]
    assert not any("gguf" in name or "coder" in name for name in names)


@pytest.mark.process
def test_cli_ladder_prints_a_markdown_table(cache_with_shared_plan):
    done, _ = _cli("--ladder", "--gpus", "24GiB,2x80GiB", cache_dir=cache_with_shared_plan)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.strip().splitlines()
    assert lines[0].startswith("| reader |") and "1 x 24 GiB" in lines[0] and "2 x 80 GiB" in lines[0]
    assert len(lines) == 2 + len(ladder_readers())
    assert all(line.count("|") == lines[0].count("|") for line in lines)


def test_the_ladder_page_shows_the_commands_output(cache_with_shared_plan):
    page = (REPO / "docs" / "gpu-plan.md").read_text()
    assert "python -m harness.plan --ladder --gpus 24GiB,40GiB,80GiB" in page
    overrides = [f"paths.cache_dir={cache_with_shared_plan}"]
    table = ladder_table(parse_gpu_groups("24GiB,40GiB,80GiB"), 2048, None, overrides)
    assert table in page, "rerun python -m harness.plan --ladder --gpus 24GiB,40GiB,80GiB and paste its table"
