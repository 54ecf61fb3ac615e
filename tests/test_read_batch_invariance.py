"""Batch size and the response cache: an answer may only be shared between reads that group prompts differently
when it is independent of the grouping: row decoding always is (harness.read.row_decoding), the library's
batched ``generate`` only in float32."""

from __future__ import annotations

import json

import pytest
from omegaconf import OmegaConf

from harness.backends.precision import machine_cpu_kind, machine_dtype
from harness.read.base import PromptRequest
from harness.read.hf import TransformersReader
from tests.conftest import REPO, SHARED_DATA

MODELS = REPO / ".cache" / "models"
HOTPOT = SHARED_DATA / "hotpotqa" / "hotpot_dev_distractor_v1_100.json"


def reader(
    dtype="float32", batch_size=8, quantization=None, cache_dir=None, max_new_tokens=12, decoding="generate", **settings
):
    return TransformersReader(
        decoding=decoding,
        name="smollm2",
        offline_model="smollm2",
        pretrained=str(MODELS / "SmolLM2-135M-Instruct"),
        models_dir=str(MODELS),
        dtype=dtype,
        batch_size=batch_size,
        quantization=quantization,
        max_new_tokens=max_new_tokens,
        cache_dir=cache_dir,
        show_progress=False,
        torch_threads=1,
        **settings,
    )


def test_row_decoding_ids_name_the_width_and_cpu_kind_in_half_precision_only():
    rows = reader("bfloat16", 8, decoding="rows").reader_id
    assert rows.endswith(f"|rows=8|cpu={machine_cpu_kind()}|threads=1")
    assert rows != reader("bfloat16", 4, decoding="rows").reader_id  # the width is a matmul shape
    assert rows != reader("bfloat16", 8).reader_id  # never an entry of batched generate
    assert "rows=" not in reader("bfloat16", 1).reader_id  # generate at batch 1 keeps its old id
    # float32: one id for both decodings and every width, as float32 answers are the same (checked below).
    ids = {reader("float32", b, decoding=d).reader_id for b in (1, 8) for d in ("rows", "generate")}
    assert len(ids) == 1


def test_reduced_precision_on_a_cpu_keys_and_names_the_thread_count():
    def with_threads(dtype, threads):
        return TransformersReader(name="smollm2", offline_model="smollm2", dtype=dtype, torch_threads=threads)

    one, two = with_threads("bfloat16", 1), with_threads("bfloat16", 2)
    assert one.reader_id.endswith("|threads=1") and two.reader_id.endswith("|threads=2")
    assert one.cache_key(PromptRequest("p", "")) != two.cache_key(PromptRequest("p", ""))
    assert one.numerics_label.endswith("/bfloat16/cpu-" + machine_cpu_kind() + "-1threads")
    assert two.numerics_label != one.numerics_label  # a report splits rows read at other thread counts
    # float32: the thread count changes no answer, so neither the id nor the numerics name it.
    assert with_threads("float32", 1).reader_id == with_threads("float32", 2).reader_id
    assert "threads" not in with_threads("float32", 2).reader_id + with_threads("float32", 2).numerics_label


def test_beam_search_needs_the_librarys_generate():
    with pytest.raises(ValueError, match="num_beams > 1.*decoding=generate"):
        TransformersReader(name="t", offline_model="smollm2", num_beams=2, decoding="rows")


def test_half_precision_puts_the_batch_size_into_the_reader_id():
    assert reader("bfloat16", 8).reader_id != reader("bfloat16", 4).reader_id
    assert reader("bfloat16", 8).reader_id.endswith("|batch=8|threads=1")
    assert reader("float16", 2).reader_id.endswith("|batch=2|threads=1")
    assert reader("auto", 4).reader_id == reader(machine_dtype(), 4).reader_id  # auto is the machine's choice
    assert reader("float32", 4, quantization="nf4").reader_id.endswith("|batch=4|threads=1")
    # Batch size 1 is one batch composition whatever the precision: the id is the one it always was.
    assert "batch=" not in reader("bfloat16", 1).reader_id


def test_float32_ids_and_cache_keys_ignore_the_batch_size():
    ids = {reader("float32", b).reader_id for b in (1, 4, 8, 16)} | {reader("fp32", 8).reader_id}
    assert len(ids) == 1 and "batch=" not in ids.pop()
    request = PromptRequest("p", "")
    assert reader("float32", 1).cache_key(request) == reader("float32", 8).cache_key(request)
    assert reader("bfloat16", 1).cache_key(request) != reader("bfloat16", 8).cache_key(request)


def test_the_offline_reader_lets_the_machine_choose_its_precision():
    cfg = OmegaConf.load(REPO / "conf" / "reader" / "smollm2_135m.yaml")
    assert cfg.dtype == "auto" and cfg.batch_size > 1
    assert cfg.get("decoding", "rows") == "rows"  # batch-invariant in every dtype


@pytest.mark.slow
def test_float32_answers_are_the_same_at_batch_1_and_batch_4():
    examples = json.loads(HOTPOT.read_text())[:6]
    one = reader("float32", 1)
    prompts = []
    for ex in examples:
        gold = {title for title, _ in ex["supporting_facts"]}
        context = "\n\n".join(f"{t}: {' '.join(s[:2])}" for t, s in ex["context"] if t in gold)
        prompts.append(PromptRequest(ex["question"], context))
    lengths = {one.count_prompt_tokens(one.render(p)) for p in prompts}
    assert len(lengths) == len(prompts)  # all different, so every batch of 4 left-pads
    four = reader("float32", 4)
    assert four.responses(prompts) == one.responses(prompts)  # raw generations too, not only the extracted answers
    rows = reader("float32", 4, decoding="rows")
    assert rows.responses(prompts) == one.responses(prompts)  # row decoding: the same float32 answers
