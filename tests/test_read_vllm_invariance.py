"""The vLLM reader's answers never depend on the prompts read with them: the same HotpotQA prompts read all
together, one at a time, in reverse order and with half of them already cached give identical answers, in
the dtype the machine picks (bfloat16 on a CPU with bf16 instructions, where continuous batching did not).

Like the other engine tests these never skip: without vLLM's venv they fail, saying how to build it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.backends.precision import machine_dtype
from harness.backends.vllm_engine import DEFAULT_VENV_PYTHON
from harness.read.local import LocalReader
from tests import test_read_vllm
from tests.helpers.hotpot import hotpot_prompts
from tests.test_read_row_decoding import assert_the_same_in_every_company, read_in_every_company


def smollm2(cache_dir: Path) -> LocalReader:
    # prefix caching as configured (on); on a CPU the engine reuses no prefix whatever the setting. Answers of 12
    # tokens at most: what is checked is that a prompt's answer is the same in every company, not its length (the
    # invariance test alone on an AVX2-only Zen 3: 34.6 s with 24 tokens, 21.3 s with 12).
    return test_read_vllm.smollm2("vllm", cache_dir, dtype="auto", max_new_tokens=12, enable_prefix_caching=True)


@pytest.fixture(scope="module")
def engine(tmp_path_factory) -> Iterator[LocalReader]:
    """One engine for the module, started by the first test (tens of seconds on a CPU)."""
    if not DEFAULT_VENV_PYTHON.is_file():
        pytest.fail(f"{DEFAULT_VENV_PYTHON} is missing: `make vllm-venv` builds vLLM's CPU venv (make test does)")
    reader = smollm2(tmp_path_factory.mktemp("engine"))
    yield reader
    reader.close()


@pytest.mark.slow
def test_the_engine_reads_in_the_machines_dtype_one_sequence_at_a_time(engine):
    assert engine.dtype_name == machine_dtype()
    assert f"|dtype={machine_dtype()}|quant=none|tp=1|seqs=1|decode=greedy|" in engine.reader_id
    generator = engine.module.backend
    assert generator.generate([engine.render(hotpot_prompts(1)[0])])  # starts the engine
    print(f"\nvLLM {generator.version} ({machine_dtype()}): engine start {generator.start_seconds:.1f} s")


@pytest.mark.slow
def test_vllm_answers_never_depend_on_the_prompts_read_with_them(engine, tmp_path):
    def sharing_the_engine(cache_dir: Path) -> LocalReader:
        reader = smollm2(cache_dir)
        reader._module = engine.module
        return reader

    # Six prompts, read 21 times in all: the engine reads one sequence at a time on a CPU (a second each on AMX,
    # two on an AVX2-only Zen 3, where eight prompts took 61 s).
    requests = hotpot_prompts(6)
    reads = read_in_every_company(sharing_the_engine, requests, tmp_path)
    together = assert_the_same_in_every_company(reads)
    assert len(set(together)) > 4, together  # real, different answers
