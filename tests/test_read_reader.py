"""The reader end to end on the real offline model: batching, the response cache, durability."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.backends.offline_models import ensure_offline_model
from harness.backends.precision import machine_cpu_kind
from harness.cache import TextStore
from harness.read.answers import extract_answer
from harness.read.base import PromptRequest
from harness.read.hf import TransformersReader

# The folder the default reader config uses, so tests and runs share one conversion.
MODEL_FOLDER = Path(__file__).resolve().parents[1] / ".cache/models/SmolLM2-135M-Instruct"

QUESTIONS = [
    ("What is the capital of France?", "Paris is the capital and most populous city of France."),
    ("Who wrote the play Hamlet?", "Hamlet is a tragedy written by William Shakespeare around 1600."),
]


@pytest.fixture(scope="session")
def smollm2_folder() -> Path:
    return ensure_offline_model("smollm2", MODEL_FOLDER)


def make_reader(
    folder: Path, cache_dir, batch_size: int, dtype: str = "float32", max_new_tokens: int = 10, decoding=None
) -> TransformersReader:
    return TransformersReader(
        decoding=decoding,
        name="smollm2-test",
        pretrained=str(folder),
        offline_model="smollm2",
        dtype=dtype,
        batch_size=batch_size,
        max_new_tokens=max_new_tokens,
        cache_dir=cache_dir,
        show_progress=False,
        torch_threads=1,  # decoding a 135M model is latency-bound; one thread is fastest on a busy CPU
    )


@pytest.fixture(scope="module")
def prompts(smollm2_folder, tmp_path_factory):
    reader = make_reader(smollm2_folder, None, 1)
    requests = [PromptRequest(q, c) for q, c in QUESTIONS]
    # Different lengths, so the batched run really left-pads the shorter prompt.
    assert len({reader.count_prompt_tokens(reader.render(r)) for r in requests}) == 2
    return requests


def test_batched_greedy_answers_equal_one_at_a_time_and_the_cache_answers_repeats(smollm2_folder, prompts, tmp_path):
    # float32: left padding shifts the attention kernels' summation order; in float32 the last-token
    # logits move by ~4e-5 (no greedy flips here), while bfloat16 moves them by up to ~0.8, which
    # changed 8 of 50 HotpotQA answers between batch size 8 and 1 (benchmarks/bench_reader_batching.py).
    batched = make_reader(smollm2_folder, tmp_path / "batched", batch_size=2)
    single = make_reader(smollm2_folder, tmp_path / "single", batch_size=1)
    together = batched.answer(prompts)
    alone = single.answer(prompts)
    assert all(isinstance(a, str) and a for a in together)
    assert together == alone
    assert "paris" in together[0].lower()
    assert (batched.generated, batched.requested) == (2, 2)

    # Repeats and a second call are served by the cache, aligned with the input order.
    again = batched.answer([prompts[1], prompts[0], prompts[1]])
    assert again == [together[1], together[0], together[1]]
    assert (batched.generated, batched.requested) == (2, 5)


def test_cache_is_shared_by_readers_with_the_same_identity(smollm2_folder, prompts, tmp_path):
    first = make_reader(smollm2_folder, tmp_path, batch_size=2)
    answers = first.answer(prompts)
    stored = TextStore(tmp_path / "responses.sqlite", table="responses").get_texts(
        [first.cache_key(p) for p in prompts]
    )
    assert [stored[first.cache_key(p)]["answer"] for p in prompts] == answers
    assert all(stored[first.cache_key(p)]["raw"].strip().startswith(a) for p, a in zip(prompts, answers, strict=False))

    same = make_reader(smollm2_folder, tmp_path, batch_size=1)  # batch size is not part of the identity
    assert same.reader_id == first.reader_id
    assert same.answer(prompts) == answers and same.generated == 0

    longer = make_reader(smollm2_folder, tmp_path, batch_size=2, max_new_tokens=11)
    assert longer.reader_id != first.reader_id
    longer.answer(prompts[:1])
    assert longer.generated == 1


def test_each_finished_batch_is_cached_before_a_failure(smollm2_folder, prompts, tmp_path):
    # Row decoding hands several rows' worth of prompts to each step; batched generate one batch, here 1 prompt.
    reader = make_reader(smollm2_folder, tmp_path, batch_size=1, decoding="generate")
    module = reader.module
    real_generate = module.generate
    calls = []

    def fail_on_second_batch(batch_prompts):
        calls.append(batch_prompts)
        if len(calls) == 2:
            raise RuntimeError("killed mid-run")
        return real_generate(batch_prompts)

    module.generate = fail_on_second_batch
    with pytest.raises(RuntimeError, match="killed mid-run"):
        reader.answer(prompts)
    assert len(TextStore(tmp_path / "responses.sqlite", table="responses")) == 1

    resumed = make_reader(smollm2_folder, tmp_path, batch_size=1, decoding="generate")
    answers = resumed.answer(prompts)
    assert resumed.generated == 1 and all(answers)


def test_bfloat16_reader_answers_a_batch(smollm2_folder, prompts):
    reader = make_reader(smollm2_folder, None, batch_size=2, dtype="bfloat16", max_new_tokens=8)
    answers = reader.answer(prompts)
    assert len(answers) == 2 and all(isinstance(a, str) and a for a in answers)
    # bf16 row decoding: the decoding width (a matmul shape), the CPU kind and the threads are part of the identity.
    assert reader.reader_id == (
        "offline:smollm2|dtype=bfloat16|quant=none|decode=greedy|beams=1|max_new_tokens=8"
        f"|rows=2|cpu={machine_cpu_kind()}|threads={reader.threads}"
    )


def test_predict_step_returns_keyed_extracted_answers(smollm2_folder, prompts):
    reader = make_reader(smollm2_folder, None, batch_size=2, max_new_tokens=6)
    rows = reader.module.predict_step({"keys": ["a", "b"], "prompts": [reader.render(r) for r in prompts]}, 0)
    assert [r["prompt_key"] for r in rows] == ["a", "b"]
    for row in rows:
        assert row["answer"] and "\n" not in row["answer"] and row["answer"] == row["answer"].strip()
        assert row["answer"] == extract_answer(row["raw"]) and row["answer"] in row["raw"]
    # The empty batches that pad a multi-process read generate nothing.
    assert reader.module.predict_step({"keys": [], "prompts": []}, 1) == []


def test_token_counter_and_tokenizer_load_without_the_model(smollm2_folder):
    reader = make_reader(smollm2_folder, None, batch_size=1)
    assert reader.token_counter.count("Paris is the capital of France.") == 7
    assert reader._module is None
