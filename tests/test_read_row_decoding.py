"""Row decoding (harness.read.row_decoding): the matmul property it rests on, its key cache, agreement with the
library's generate, and answers that never depend on the prompts read with them, for every local CPU backend
in the dtype the machine picks."""

from __future__ import annotations

import pytest
import torch
from transformers import Qwen2Config, Qwen2ForCausalLM

from harness.backends.precision import machine_dtype
from harness.read.hf import TransformersReader
from harness.read.llama_cpp import LlamaCppReader
from harness.read.row_cache import RowCache
from harness.read.row_decoding import RowDecoder
from tests.helpers.hotpot import hotpot_prompts
from tests.test_read_batch_invariance import MODELS, reader


@pytest.mark.parametrize("shape", [(896, 4864), (4864, 896), (1536, 8960)])
def test_a_fixed_width_matmul_row_depends_on_its_own_input_alone(shape):
    """What row decoding rests on, checked on this machine in its dtype: at a fixed number of rows, a row's
    result is the same whatever its position and the other rows (at another number of rows it may not be)."""
    dtype = getattr(torch, machine_dtype())
    generator = torch.Generator().manual_seed(0)
    layer = torch.nn.Linear(*shape).to(dtype)
    inputs = torch.randn(64, shape[0], generator=generator).to(dtype)
    width = 8
    with torch.inference_mode():
        reference = layer(inputs[:width])[0]
        for trial in range(16):
            company = torch.randperm(64, generator=generator)[:width]
            slot = trial % width
            company[slot] = 0
            assert torch.equal(layer(inputs[company])[slot], reference)


def test_the_row_cache_holds_each_rows_keys_right_aligned_through_steps_trims_and_growth():
    layers, heads, dim = 2, 2, 4
    generator = torch.Generator().manual_seed(1)

    def prefilled(length: int) -> tuple[RowCache, list[torch.Tensor]]:
        cache = RowCache(layers)
        keys = [torch.randn(1, heads, length, dim, generator=generator) for _ in range(layers)]
        for layer, k in enumerate(keys):
            cache.update(k, -k, layer)
        return cache, keys

    shared = RowCache(layers)
    for layer in range(layers):
        shared.keys[layer] = torch.zeros(3, heads, 0, dim)
        shared.values[layer] = torch.zeros(3, heads, 0, dim)
    expected: dict[int, list[torch.Tensor]] = {}  # row -> per layer, its live keys (a reference built by cat)
    starts: dict[int, int] = {}
    for row, length in ((0, 5), (1, 9), (2, 3)):  # the second is longer than the live length: the front grows
        cache, keys = prefilled(length)
        before = shared.length
        starts[row] = shared.place(row, cache)
        for other in starts:
            if other != row:
                starts[other] += shared.length - before
        expected[row] = [k[0] for k in keys]
    for step in range(70):  # past the buffers' first size: they move
        new = [torch.randn(3, heads, 1, dim, generator=generator) for _ in range(layers)]
        for layer in range(layers):
            keys, values = shared.update(new[layer], -new[layer], layer)
            assert keys.shape[2] == shared.length
        for row in expected:
            expected[row] = [torch.cat([e, n[row]], dim=1) for e, n in zip(expected[row], new, strict=True)]
        if step == 10:  # the first row no longer attends to its first 4 positions: forget them
            shared.drop_front(min(starts.values()))
            trimmed = min(starts.values())
            starts = {row: start - trimmed for row, start in starts.items()}
    for row, start in starts.items():
        for layer in range(layers):
            keys, values = shared.live(layer)
            assert torch.equal(keys[row, :, start:], expected[row][layer])
            assert torch.equal(values[row, :, start:], -expected[row][layer])


def smollm2(
    dtype: str, decoding: str, batch_size: int, cache_dir, max_new_tokens: int = 12, **settings
) -> TransformersReader:
    return reader(dtype, batch_size, cache_dir=cache_dir, max_new_tokens=max_new_tokens, decoding=decoding, **settings)


@pytest.mark.slow
def test_row_decoding_gives_the_librarys_greedy_answers_at_batch_1(tmp_path):
    """In the machine's dtype, one row wide: the library's shapes (each prompt prefilled alone, one row a decoding
    step), read as the GPU reads the chosen tokens, five steps at a time. Wider rows equal the library's batch-1
    answers in float32 (tests/test_read_batch_invariance.py) but not with every CPU's bf16 kernels: with bf16
    matmuls kept off AMX, as on AVX-512 CPUs without it, 1 of these 6 answers differed at 4 rows."""
    dtype = machine_dtype()
    requests = hotpot_prompts(6)
    library = smollm2(dtype, "generate", 1, tmp_path / "generate").responses(requests)
    assert smollm2(dtype, "rows", 1, tmp_path / "runs", sync_every=5).responses(requests) == library
    # Four rows wide, rows refilled as answers end: reading the tokens five steps at a time changes no answer.
    rows = smollm2(dtype, "rows", 4, tmp_path / "rows").responses(requests)
    assert smollm2(dtype, "rows", 4, tmp_path / "rows_runs", sync_every=5).responses(requests) == rows


def test_decoding_steps_read_by_the_host_in_runs_give_the_answers_of_one_step_at_a_time():
    """In bf16, with answers ending at an end-of-sequence token inside a run: each row keeps its tokens up to its
    end, and rows are refilled later, never changing an answer; the host reads the tokens once per run."""
    torch.manual_seed(0)
    config = Qwen2Config(
        vocab_size=300, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=512,
    )  # fmt: skip
    model = Qwen2ForCausalLM(config).eval().to(torch.bfloat16)
    lengths = [40, 30, 90, 20, 150, 10, 60, 33, 71, 12, 99]
    prompts = [[(7 * i + j) % 300 for j in range(n)] for i, n in enumerate(lengths)]
    eos = {5, 17, 42}
    reads: dict[int, int] = {}

    def decode(sync_every: int, prefill_tokens: int) -> list[list[int]]:
        decoder = RowDecoder(model, 4, 20, eos, sync_every=sync_every, prefill_tokens=prefill_tokens)
        original = decoder._decode
        reads[sync_every] = 0

        def counted(*args):
            reads[sync_every] += 1
            return original(*args)

        decoder._decode = counted
        return decoder.generate(prompts)

    for prefill_tokens in (0, 128):
        one = decode(1, prefill_tokens)
        assert 0 < sum(len(answer) < 20 for answer in one) < len(prompts)  # some end early, some at the cap
        for sync_every in (3, 8):
            assert decode(sync_every, prefill_tokens) == one, (sync_every, prefill_tokens)
        assert reads[8] * 3 < reads[1]
    with pytest.raises(ValueError, match="sync_every"):
        RowDecoder(model, 4, 20, eos, sync_every=0)


def read_in_every_company(make_reader, requests, tmp_path) -> dict[str, list[str]]:
    """The raw answers to ``requests`` read all at once, one at a time (the first half: a prompt alone is the
    slowest read), in reverse order and with every other one already cached, each by a fresh reader (and
    response cache) sharing the first one's module."""
    first = make_reader(tmp_path / "together")
    reads = {"together": [r["raw"] for r in first.responses(requests)]}

    def fresh(name):
        reader = make_reader(tmp_path / name)
        reader._module = first.module  # the loaded weights, not a second copy
        return reader

    alone = fresh("alone")
    reads["one at a time"] = [alone.responses([request])[0]["raw"] for request in requests[: len(requests) // 2]]
    reads["reversed"] = [r["raw"] for r in fresh("reversed").responses(requests[::-1])][::-1]
    half = fresh("half cached")
    half.responses(requests[::2])
    reads["half cached"] = [r["raw"] for r in half.responses(requests)]
    assert half.generated == len(requests)  # the second read generated only the uncached half
    return reads


def assert_the_same_in_every_company(reads: dict[str, list[str]]) -> list[str]:
    """Every read's answers equal the ones read all together (which it returns)."""
    together = reads.pop("together")
    for company, raws in reads.items():
        assert raws == together[: len(raws)], company
    return together


@pytest.mark.slow
def test_transformers_answers_never_depend_on_the_prompts_read_with_them(tmp_path):
    """In the dtype the machine picks (bf16 where it has bf16 instructions, where batched generate is not)."""
    # Eight prompts in rows of four: read together, each shares its rows with three others and refills them.
    requests = hotpot_prompts(8)
    reads = read_in_every_company(lambda d: smollm2("auto", "rows", 4, d, max_new_tokens=16), requests, tmp_path)
    together = assert_the_same_in_every_company(reads)
    assert len(set(together)) > 4  # real, different answers


@pytest.mark.slow
def test_packed_prefill_answers_never_depend_on_the_prompts_packed_with_them(tmp_path):
    """The GPU's packed prefill, checked on this CPU in its dtype: each prompt shares a chunk of 512 tokens with
    another (or none), at another place in it. (The prompts have 160 to 260 tokens: two fill most of a chunk, and
    a chunk is computed whole however few it holds. The GPU's default chunk, 1024 tokens, holds four: with it
    the test took 36 s rather than 31 s with bf16 matmuls kept off AMX, as on CPUs without it.)"""
    requests = hotpot_prompts(8)
    make = lambda d: smollm2("auto", "rows", 4, d, max_new_tokens=12, prefill_tokens=512)  # noqa: E731
    reads = read_in_every_company(make, requests, tmp_path)
    together = assert_the_same_in_every_company(reads)
    assert len(set(together)) > 4


def test_a_packed_prefill_always_computes_a_whole_chunk_and_a_longer_prompt_alone():
    torch.manual_seed(0)
    config = Qwen2Config(
        vocab_size=300, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=512,
    )  # fmt: skip
    model = Qwen2ForCausalLM(config).eval()
    shapes: list[tuple[int, ...]] = []
    model.register_forward_pre_hook(
        lambda _, args, kwargs: shapes.append(tuple(kwargs["input_ids"].shape)), with_kwargs=True
    )
    lengths = [40, 30, 90, 20, 150, 10, 60]  # 150 exceeds the chunk of 128
    prompts = [[(7 * i + j) % 300 for j in range(n)] for i, n in enumerate(lengths)]
    packed = RowDecoder(model, 4, 5, {-1}, prefill_tokens=128).generate(prompts)
    prefills = [shape for shape in shapes if shape[1] > 1]
    assert (1, 150) in prefills  # alone, at its own length
    assert all(shape in ((1, 128), (1, 150)) for shape in prefills)
    assert len([s for s in prefills if s == (1, 128)]) < len(lengths) - 1  # several prompts shared chunks
    assert all(shape[0] == 4 for shape in shapes if shape[1] == 1)  # every decoding step 4 rows wide
    assert packed == RowDecoder(model, 4, 5, {-1}).generate(prompts)  # float32: the same answers as alone


@pytest.mark.slow
def test_llama_cpp_answers_never_depend_on_the_prompts_read_with_them(tmp_path):
    def make(cache_dir):
        return LlamaCppReader(
            name="smollm2-gguf",
            offline_model="smollm2",
            models_dir=str(MODELS),
            batch_size=4,
            max_new_tokens=12,
            cache_dir=cache_dir,
            show_progress=False,
            llama_cpp={"n_threads": 1, "n_ctx": 2048},
        )

    requests = hotpot_prompts(4)
    assert_the_same_in_every_company(read_in_every_company(make, requests, tmp_path))
