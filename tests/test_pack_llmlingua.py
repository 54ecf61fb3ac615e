"""The LLMLingua packer offline: reader-token budgets, the tiktoken stand-in, both methods' code paths.

LLMLingua-2 needs a trained token classifier that no PyPI package ships, so its path is exercised
with a tiny randomly initialised BERT classifier built here: the output text means nothing, only the
plumbing (offline construction, budget, method label, caching) is under test. LLMLingua-1 runs for
real with the packaged SmolLM2-135M (slow).
"""

from __future__ import annotations

from pathlib import Path

import llmlingua.prompt_compressor as llmlingua_module
import numpy as np
import pytest

from harness.backends.precision import cpu_flags
from harness.core.types import Example, Pool, Snippet
from harness.pack.base import PackingRequest
from harness.pack.llmlingua import (
    LLMLinguaPacker,
    ReaderEncoding,
    attributed_sources,
    compressor_dtype,
    load_prompt_compressor,
)
from harness.text.tokens import TokenCounter
from tests.helpers.tiny_models import tiny_llmlingua2_classifier

MODELS_DIR = Path(__file__).resolve().parents[1] / ".cache" / "models"

DOCUMENTS = {
    "d1": [
        "The Eiffel Tower is a wrought-iron lattice tower on the Champ de Mars in Paris, France.",
        "It is named after the engineer Gustave Eiffel, whose company designed and built the tower.",
        "It was constructed from 1887 to 1889 as the centrepiece of the 1889 World's Fair.",
    ],
    "d2": [
        "The Statue of Liberty is a colossal neoclassical sculpture on Liberty Island in New York Harbor.",
        "Its metal framework was built by Gustave Eiffel.",
    ],
    "d3": ["Bananas are an elongated, edible fruit produced by several kinds of large flowering plants."],
}
QUESTION = "Who designed the tower built for the 1889 World's Fair?"


@pytest.fixture(scope="module")
def tokens() -> TokenCounter:
    from transformers import AutoTokenizer

    from harness.retrieve.encoder import resolve_model_path

    return TokenCounter(AutoTokenizer.from_pretrained(resolve_model_path("offline:all-MiniLM-L6-v2")))


def make_request(tokens, budget: int) -> PackingRequest:
    snippets = [
        Snippet(text=s, cand_id=doc, source_ids=(doc,), tokens=tokens.count(s), rank=rank, position=position)
        for rank, (doc, sentences) in enumerate(DOCUMENTS.items())
        for position, s in enumerate(sentences)
    ]
    dim = 8
    embeddings = np.eye(len(snippets), dim, dtype=np.float32)
    query = np.full(dim, 1 / np.sqrt(dim), dtype=np.float32)
    example = Example(
        question_id="q", question=QUESTION, answers=("Gustave Eiffel",), gold_doc_ids=("d1",), documents=()
    )
    pool = Pool(example=example, candidates=[], embeddings=embeddings[:0], query_embedding=query)
    return PackingRequest(QUESTION, pool, snippets, embeddings, query, budget, tokens)


@pytest.fixture(scope="module")
def tiny_llmlingua2_model(tmp_path_factory) -> str:
    """A random 1-layer BERT token classifier whose path names a backbone llmlingua supports."""
    text = " ".join(s for sentences in DOCUMENTS.values() for s in sentences)
    return tiny_llmlingua2_classifier(tmp_path_factory.mktemp("models"), text)


# ---- no model needed ------------------------------------------------------------------------------
def test_reader_encoding_uses_the_reader_tokenizer(tokens):
    encoding = ReaderEncoding(tokens)
    ids = encoding.encode("Gustave Eiffel built it.")
    assert len(ids) == tokens.count("Gustave Eiffel built it.")
    assert encoding.decode(ids) == "gustave eiffel built it."  # MiniLM is uncased
    with pytest.raises(RuntimeError, match="reader tokenizer"):
        ReaderEncoding().encode("x")


def test_llmlingua2_rejects_a_path_without_a_supported_backbone():
    with pytest.raises(ValueError, match="my-own-classifier.*xlm-roberta-large"):
        LLMLinguaPacker(use_llmlingua2=True, model_name="/models/my-own-classifier")
    assert LLMLinguaPacker(use_llmlingua2=True).model_name == "microsoft/llmlingua-2-xlm-roberta-large-meetingbank"
    with pytest.raises(ValueError, match="max_attempts"):
        LLMLinguaPacker(max_attempts=0)


AMX = frozenset({"avx2", "avx512f", "avx512_bf16", "amx_bf16"})
AVX2 = frozenset({"avx2", "fma"})
AVX512_BF16 = frozenset({"avx2", "avx512f", "avx512_bf16"})  # an AVX-512 bf16 CPU without AMX (Zen 4)


def test_dtype_auto_is_bf16_only_where_the_cpu_computes_it(monkeypatch, tokens):
    import harness.pack.llmlingua as module

    monkeypatch.setattr(module, "cpu_flags", lambda: AMX)
    amx = LLMLinguaPacker(models_dir="/nonexistent")
    assert amx.model_config["torch_dtype"] == "bfloat16" and amx.numerics == "bfloat16|cpu=amx"
    # LLMLingua-2 stays float32: llmlingua reads its scores with .numpy()
    assert LLMLinguaPacker(use_llmlingua2=True).model_config["torch_dtype"] == "float32"
    with pytest.raises(ValueError, match=r"packer.model_config.torch_dtype=bfloat16 with LLMLingua-2"):
        LLMLinguaPacker(use_llmlingua2=True, model_config={"torch_dtype": "bfloat16"})
    explicit = LLMLinguaPacker(models_dir="/nonexistent", model_config={"torch_dtype": "float32"})
    assert explicit.numerics == "float32|cpu"

    monkeypatch.setattr(module, "cpu_flags", lambda: AVX2)
    avx2 = LLMLinguaPacker(models_dir="/nonexistent")
    assert avx2.model_config["torch_dtype"] == "float32" and avx2.numerics == "float32|cpu"
    with pytest.raises(ValueError, match=r"torch_dtype=bf16 on a avx2 CPU without bf16 instructions"):
        LLMLinguaPacker(model_config={"torch_dtype": "bf16"})
    # bf16 instructions without AMX: float32, the faster there; bf16 stays available when asked for.
    monkeypatch.setattr(module, "cpu_flags", lambda: AVX512_BF16)
    assert LLMLinguaPacker(models_dir="/nonexistent").numerics == "float32|cpu"
    asked = LLMLinguaPacker(models_dir="/nonexistent", model_config={"torch_dtype": "bfloat16"})
    assert asked.numerics == "bfloat16|cpu=avx512_bf16"

    # float32 is float32 on any CPU: one key; bf16 compressions are kept apart from float32 ones
    request, contexts = make_request(tokens, 40), ["a", "b"]
    assert avx2.compression_key(request, contexts) == explicit.compression_key(request, contexts)
    assert amx.compression_key(request, contexts) != explicit.compression_key(request, contexts)


def test_text_that_fits_passes_through_without_a_model(tokens):
    request = make_request(tokens, budget=1000)
    packer = LLMLinguaPacker(models_dir="/nonexistent")  # would fail if it tried to load the LM
    context = packer.pack(request)
    assert len(context.snippets) == 1 and context.snippets[0] not in request.snippets
    snippet = context.snippets[0]
    assert snippet.text == "\n".join(" ".join(s) for s in DOCUMENTS.values())
    assert snippet.source_ids == ("d1", "d2", "d3")
    assert snippet.tokens == tokens.count(snippet.text) <= 1000
    assert context.extra["method"] == "llmlingua-1" and context.extra["compressed"] is False


def test_zero_budget_gives_an_empty_context(tokens):
    context = LLMLinguaPacker(models_dir="/nonexistent").pack(make_request(tokens, budget=0))
    assert context.snippets == []


def test_sources_are_credited_by_surviving_content_terms():
    groups = [(("d1",), "alpha beta gamma delta"), (("d2",), "epsilon zeta"), (("d3", "d4"), "alpha eta")]
    # d1 keeps 3/4 of its terms, d2 none, d3/d4 1/2
    assert attributed_sources(groups, "alpha beta gamma", 0.5) == ("d1", "d3", "d4")
    assert attributed_sources(groups, "alpha beta gamma", 0.6) == ("d1",)


# ---- LLMLingua-2 plumbing with a random classifier -----------------------------------------------
def test_llmlingua2_path_runs_offline_within_budget(tokens, tiny_llmlingua2_model):
    original = llmlingua_module.tiktoken.encoding_for_model
    packer = LLMLinguaPacker(use_llmlingua2=True, model_name=tiny_llmlingua2_model)
    for budget in (12, 30, 60):
        context = packer.pack(make_request(tokens, budget))
        assert context.extra["method"] == "llmlingua-2"
        assert len(context.snippets) == 1
        snippet = context.snippets[0]
        assert snippet.tokens == tokens.count(snippet.text) <= budget
        assert set(snippet.source_ids) <= {"d1", "d2", "d3"}
        assert context.extra["compressed"] is True
    assert llmlingua_module.tiktoken.encoding_for_model is original  # the stand-in was only temporary
    # one compressor per process and model
    again = LLMLinguaPacker(name="other", use_llmlingua2=True, model_name=tiny_llmlingua2_model)
    assert again.compressor() is packer.compressor()
    assert load_prompt_compressor(tiny_llmlingua2_model, True, "cpu", packer.model_config) is packer.compressor()


# ---- LLMLingua-1 with the packaged small LM ------------------------------------------------------
@pytest.mark.slow
def test_llmlingua1_compresses_offline_with_smollm2(tokens):
    from harness.backends.offline_models import default_folder, ensure_offline_model

    folder = default_folder("smollm2", MODELS_DIR)
    ensure_offline_model("smollm2", folder)  # returns at once when the converted folder exists
    packer = LLMLinguaPacker(models_dir=str(MODELS_DIR))
    request = make_request(tokens, budget=40)
    original_tokens = tokens.count("\n".join(" ".join(s) for s in DOCUMENTS.values()))
    context = packer.pack(request)
    assert context.extra["method"] == "llmlingua-1"
    assert context.extra["compressed"] is True and context.extra["original_tokens"] == original_tokens > 40
    assert 1 <= len(context.extra["target_tokens"]) <= packer.max_attempts
    snippet = context.snippets[0]
    assert snippet.text and snippet.tokens == tokens.count(snippet.text) <= 40
    assert set(snippet.source_ids) <= {"d1", "d2", "d3"}


@pytest.mark.slow
def test_another_budget_ranks_the_documents_without_a_forward_pass_and_compresses_as_afresh(tokens):
    """The documents' perplexities given the question are computed once per compressor; a second budget reuses
    them (no new ranking pass) and its text is the one a compressor with nothing remembered gives."""
    packer = LLMLinguaPacker(models_dir=str(MODELS_DIR))
    remembered = packer.compressor().get_condition_ppl
    remembered.cache_clear()
    packer.pack(make_request(tokens, budget=40))
    ranked = remembered.cache_info()
    assert ranked.misses >= len(DOCUMENTS)  # each document ranked at least once
    second = packer.pack(make_request(tokens, budget=30)).snippets[0].text
    again = remembered.cache_info()
    assert again.misses == ranked.misses and again.hits > ranked.hits
    remembered.cache_clear()  # the same compressor with nothing remembered (the packer keeps no texts)
    assert packer.pack(make_request(tokens, budget=30)).snippets[0].text == second
    assert remembered.cache_info().misses >= len(DOCUMENTS)


def test_legacy_kv_cache_wrapper_round_trips_pairs():
    """llmlingua slices the cache as (key, value) pairs; the wrapper feeds transformers a Cache and hands
    pairs back, so iterative compression of long contexts works with transformers 5."""
    import types

    import torch
    from transformers import Cache

    from harness.pack.llmlingua import LegacyKVCacheModel

    seen = {}

    def fake_model(input_ids=None, past_key_values=None, **_):
        seen["cache"] = past_key_values
        k = torch.ones(1, 2, 3, 4)
        out_cache = past_key_values if past_key_values is not None else __import__("transformers").DynamicCache()
        out_cache.update(k, k, 0)
        return types.SimpleNamespace(past_key_values=out_cache, device="cpu")

    wrapped = LegacyKVCacheModel(fake_model)
    first = wrapped(input_ids=None)
    assert isinstance(first.past_key_values, list) and len(first.past_key_values[0]) == 2
    sliced = [[k[:, :, :2], v[:, :, :2]] for k, v in first.past_key_values]  # what llmlingua does
    second = wrapped(input_ids=None, past_key_values=sliced)
    assert isinstance(seen["cache"], Cache)
    assert second.past_key_values[0][0].shape[2] == 2 + 3


def test_compressions_are_cached_across_packers_and_keyed_by_budget(tokens, tiny_llmlingua2_model, tmp_path):
    first = LLMLinguaPacker(use_llmlingua2=True, model_name=tiny_llmlingua2_model, cache_dir=tmp_path)
    calls = []
    compressor = first.compressor()
    original = compressor.compress_prompt

    def counting(*args, **kwargs):
        calls.append(kwargs["target_token"])
        return original(*args, **kwargs)

    compressor.compress_prompt = counting
    try:
        made = first.pack(make_request(tokens, 30))
        assert calls, "the first pack must compress"
        n_calls = len(calls)
        # A new packer over the same cache (another reader, a rerun) compresses nothing and gives the same text.
        again = LLMLinguaPacker(name="again", use_llmlingua2=True, model_name=tiny_llmlingua2_model, cache_dir=tmp_path)
        reused = again.pack(make_request(tokens, 30))
        assert len(calls) == n_calls
        assert [s.text for s in reused.snippets] == [s.text for s in made.snippets]
        assert reused.extra["target_tokens"] == made.extra["target_tokens"]
        # Another budget is another compression.
        again.pack(make_request(tokens, 12))
        assert len(calls) > n_calls
    finally:
        compressor.compress_prompt = original


FAILING = "5ab3e45655429976abd1bcd4"  # IRCoT HotpotQA: llmlingua 0.2.2 fails on it at B = 96 (bf16 compressor)


def run_harness(tmp_path, *arguments: str):
    import os
    import subprocess
    import sys

    from tests.conftest import REPO

    env = {**os.environ, "HARNESS_CACHE_DIR": str(tmp_path / "cache")}
    common = ["dataset=hotpotqa_fork_dev_subsampled", "packer=llmlingua", "read=false", "logger=none"]
    return subprocess.run(
        [sys.executable, "-m", "harness", *arguments, *common],
        env=env, cwd=REPO, capture_output=True, text=True, timeout=600,
    )  # fmt: skip


BF16_COMPRESSOR = compressor_dtype(cpu_flags()) == "bfloat16"
# At B = 96 llmlingua 0.2.2 raises an IndexError for FAILING at the targets 58 and 66 (compressor in bf16).
LIBRARY_FAILS_AT = (58, 66)


# One run a budget, so the two run side by side (a sweep over both took 107 s on an AVX2-only Zen 3, the
# compressor's forward passes in float32 most of it).
@pytest.mark.slow
@pytest.mark.parametrize("budget", [96, 128])
def test_llmlingua_packs_within_budget_on_hotpotqa_questions(budget, tmp_path):
    """Every packing within its budget; on a CPU whose compressor runs in bf16, FAILING's packing at B = 96 passed
    over the targets where the library fails (with the default retries) and still fits."""
    import json

    import pandas as pd

    two = tmp_path / "two.txt"
    two.write_text(f"{FAILING}\n5a8c7595554299585d9e36b6\n")
    run = run_harness(tmp_path, f"dataset.question_ids_file={two}", f"budget={budget}",
                      f"hydra.run.dir={tmp_path / 'r'}")  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    rows = pd.read_parquet(tmp_path / "r" / "rows.parquet")
    assert (rows["budget"] == budget).all() and len(rows) == 2
    assert (rows["context_tokens"] <= budget).all() and (rows["context_tokens"] > 0).all()
    if budget == 96 and BF16_COMPRESSOR:
        held = rows.set_index("question_id").loc[FAILING]
        targets = json.loads(held["pack.target_tokens"])
        assert not set(LIBRARY_FAILS_AT) & set(targets), targets


@pytest.mark.slow
@pytest.mark.skipif(not BF16_COMPRESSOR, reason="the failure was seen with the compressor in bf16 (this CPU: float32)")
def test_without_retries_the_librarys_failure_comes_through_naming_the_question(tmp_path):
    """The failure the packer holds (test above) is the library's: with no retries the run fails with its error."""
    one = tmp_path / "one.txt"
    one.write_text(f"{FAILING}\n")
    bare = run_harness(tmp_path, f"dataset.question_ids_file={one}", "budget=96", "packer.library_retries=0",
                       f"hydra.run.dir={tmp_path / 'bare'}")  # fmt: skip
    assert bare.returncode != 0
    assert "IndexError: The shape of the mask" in bare.stderr and FAILING in bare.stderr
