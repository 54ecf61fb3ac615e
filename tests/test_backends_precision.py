"""``dtype: auto`` follows the machine: bf16 on a CPU with avx512_bf16 or AMX, float32 elsewhere, and the
reader and tree-LM identities hold the dtype chosen, so a cache never mixes the two."""

from __future__ import annotations

import logging

import pytest
import torch

from harness.backends import loading, precision
from harness.core.devices import CudaProbe

AVX2_ONLY = "processor\t: 0\nflags\t\t: fpu sse sse2 avx avx2 fma\n"
SAPPHIRE_RAPIDS = "processor\t: 0\nflags\t\t: fpu avx2 avx512f avx512_bf16 amx_bf16 amx_tile amx_int8\n"
AMX_ONLY = "flags\t\t: avx2 avx512f amx_bf16 amx_tile\n"


@pytest.fixture
def machine(monkeypatch):
    """Pretend to be a CPU-only machine whose /proc/cpuinfo says ``text``."""
    parse = precision.cpu_flags

    def use(text: str) -> None:
        monkeypatch.setattr(precision, "cpu_flags", lambda cpuinfo=None: parse(text))
        monkeypatch.setattr(precision, "probe_cuda", lambda: CudaProbe("2.13.0+cpu", None, None))  # no CUDA
        precision.machine_dtype.cache_clear()
        precision.machine_cpu_kind.cache_clear()

    yield use
    precision.machine_dtype.cache_clear()
    precision.machine_cpu_kind.cache_clear()


def test_flags_come_from_the_first_cpu():
    assert {"avx2", "fma"} <= precision.cpu_flags(AVX2_ONLY) and "avx512_bf16" not in precision.cpu_flags(AVX2_ONLY)
    assert precision.cpu_flags("model name: x\n") == frozenset()


def test_the_model_name_comes_from_the_first_cpu():
    two = "processor\t: 0\nmodel name\t: AMD EPYC 9R14\nflags\t\t: avx2\nprocessor\t: 1\nmodel name\t: other\n"
    assert precision.cpu_model(two) == "AMD EPYC 9R14"
    assert precision.cpu_model(AVX2_ONLY) == "unknown CPU"


@pytest.mark.parametrize(
    ("cpuinfo", "expected"), [(AVX2_ONLY, "float32"), (SAPPHIRE_RAPIDS, "bfloat16"), (AMX_ONLY, "bfloat16")]
)
def test_auto_picks_bf16_only_with_bf16_instructions(machine, caplog, cpuinfo, expected):
    machine(cpuinfo)
    with caplog.at_level(logging.INFO, logger="harness.backends.precision"):
        assert loading.resolve_dtype("auto") == getattr(torch, expected)
        loading.resolve_dtype("auto")
    assert caplog.text.count("dtype auto:") == 1  # logged once


def test_an_explicit_dtype_wins(machine):
    machine(SAPPHIRE_RAPIDS)
    assert loading.resolve_dtype("float32") == torch.float32


def test_the_reader_identity_holds_the_chosen_dtype(machine):
    from harness.read.hf import TransformersReader

    ids = {}
    for name, cpuinfo in (("avx2", AVX2_ONLY), ("amx", SAPPHIRE_RAPIDS)):
        machine(cpuinfo)
        reader = TransformersReader(name="r", offline_model="smollm2", dtype="auto", batch_size=8)
        ids[name] = reader.reader_id
    assert "|dtype=float32|" in ids["avx2"] and "batch=" not in ids["avx2"] and "rows=" not in ids["avx2"]
    # bf16 row decoding: the decoding width (a matmul shape) and the CPU kind (its kernels) join the id.
    assert "|dtype=bfloat16|" in ids["amx"] and "|rows=8|cpu=amx|threads=" in ids["amx"]
    explicit = TransformersReader(name="r", offline_model="smollm2", dtype="float32", batch_size=8).reader_id
    assert explicit == ids["avx2"]  # auto on an AVX2 machine shares float32's cache entries


def test_the_tree_lm_identity_holds_the_chosen_dtype(machine):
    from harness.lm.local import LocalChatLM

    machine(AVX2_ONLY)
    avx2 = LocalChatLM(name="lm", offline_model="smollm2", dtype="auto").model_id
    machine(SAPPHIRE_RAPIDS)
    amx = LocalChatLM(name="lm", offline_model="smollm2", dtype="auto").model_id
    assert "dtype=float32" in avx2 and "dtype=bfloat16" in amx
