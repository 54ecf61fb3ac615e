"""What the CPU cannot run is a config error before any model loads, and the default reader is the one chosen
for the CPU it finds."""

from __future__ import annotations

from harness.backends.precision import cpu_flags
from harness.read.machine import chosen_settings
from harness.run.cpu_check import cpu_problems
from tests.conftest import compose_cfg
from tests.test_backends_precision import AVX2_ONLY, SAPPHIRE_RAPIDS

AVX2 = cpu_flags(AVX2_ONLY)
AMX = cpu_flags(SAPPHIRE_RAPIDS)
NO_AVX2 = cpu_flags("flags\t\t: fpu sse sse2 sse4_2\n")


def test_bf16_on_a_cpu_without_bf16_instructions_is_one_line_naming_the_key_and_what_the_cpu_offers():
    cfg = compose_cfg(["reader=smollm2_135m", "reader.dtype=bfloat16"])
    (line,) = cpu_problems(cfg, AVX2, "x86_64")
    assert line.startswith("reader 'smollm2-135m': reader.dtype=bfloat16 on a CPU without bf16 instructions")
    assert "a avx2 CPU: dtype auto runs float32 here" in line and "+reader.emulate_bf16=true" in line
    assert cpu_problems(cfg, AMX, "x86_64") == []  # the CPU has them
    assert (
        cpu_problems(compose_cfg(["reader=smollm2_135m", "+reader.emulate_bf16=true", "reader.dtype=bf16"]), AVX2) == []
    )
    assert cpu_problems(compose_cfg(["reader=smollm2_135m"]), AVX2) == []  # auto: float32 there


def test_llama_cpp_on_an_x86_cpu_without_avx2_is_refused():
    cfg = compose_cfg(["reader=smollm2_135m_gguf"])
    (line,) = cpu_problems(cfg, NO_AVX2, "x86_64")
    assert "needs AVX2, which this CPU lacks" in line and "reader=qwen2.5_coder_0.5b_hf" in line
    assert cpu_problems(cfg, NO_AVX2, "aarch64") == []  # ARM builds have their own kernels
    assert cpu_problems(cfg, AVX2, "x86_64") == []


def test_the_default_reader_is_transformers_bf16_with_bf16_instructions_and_llama_cpp_elsewhere():
    cfg = compose_cfg(tiny_reader=False)
    assert cfg.reader.name == "qwen2.5-coder-0.5b"
    reader = dict(cfg.reader)
    with_bf16, without = chosen_settings(reader, AMX), chosen_settings(reader, AVX2)
    assert with_bf16["_target_"] == "harness.read.hf.TransformersReader"
    assert (with_bf16["dtype"], with_bf16["decoding"]) == ("bfloat16", "rows")
    assert without["_target_"] == "harness.read.llama_cpp.LlamaCppReader" and "dtype" not in without
    for settings in (with_bf16, without):  # the shared keys reach both
        assert (settings["name"], settings["batch_size"], settings["max_new_tokens"]) == ("qwen2.5-coder-0.5b", 8, 24)
    # The machine's choice passes the CPU check on either machine.
    assert cpu_problems(cfg, AMX, "x86_64") == [] and cpu_problems(cfg, AVX2, "x86_64") == []


def test_the_config_check_runs_the_cpu_check(monkeypatch):
    from harness.run import config_check

    monkeypatch.setattr("harness.run.cpu_check.cpu_flags", lambda: AVX2)
    found = config_check.problems(compose_cfg(["reader=smollm2_135m", "reader.dtype=bfloat16"]))
    assert any("reader.dtype=bfloat16 on a CPU without bf16 instructions" in line for line in found)
