"""Token counts through the fast tokenizer's backend equal the library call's, whatever state it was left in."""

from __future__ import annotations

import pytest

from tests.conftest import REPO

SMOLLM2 = REPO / ".cache" / "models" / "SmolLM2-135M-Instruct"

TEXTS = [
    "Zakarian (Armenian: Զաքարյան) was a painter from Yerevan.",
    "<|im_start|>user\nWho wrote it?<|im_end|>\n<|im_start|>assistant\n",
    "  leading spaces,\n\nblank lines\tand tabs  ",
    "",
    "東京は日本の首都です。" * 40,
]


@pytest.fixture(scope="module")
def smollm2():
    if not (SMOLLM2 / "tokenizer.json").exists():
        pytest.skip(f"the offline reader's tokenizer is not prepared in {SMOLLM2} (make setup)")
    return SMOLLM2


@pytest.fixture(scope="module")
def tokenizer(smollm2):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(smollm2)


def library_lengths(tokenizer, texts, add_special_tokens):
    return [len(ids) for ids in tokenizer(list(texts), add_special_tokens=add_special_tokens)["input_ids"]]


@pytest.mark.parametrize("add_special_tokens", [False, True])
def test_counts_equal_the_library_call(tokenizer, add_special_tokens):
    from harness.text.tokens import encoded_lengths

    expected = library_lengths(tokenizer, TEXTS, add_special_tokens)
    assert encoded_lengths(tokenizer, TEXTS, add_special_tokens) == expected
    assert expected[1] < library_lengths(tokenizer, [TEXTS[1].replace("|", "/")], add_special_tokens)[0]


def test_a_backend_left_truncating_or_splitting_special_tokens_counts_as_the_library_does(tokenizer):
    from harness.text.tokens import encoded_lengths

    full = library_lengths(tokenizer, TEXTS, False)
    tokenizer(TEXTS[0], truncation=True, max_length=3)  # leaves truncation set on the backend
    assert tokenizer.backend_tokenizer.truncation is not None
    assert encoded_lengths(tokenizer, TEXTS) == full

    tokenizer.split_special_tokens = True
    try:
        split = encoded_lengths(tokenizer, TEXTS)
        assert split == library_lengths(tokenizer, TEXTS, False)
        assert split[1] > full[1]  # "<|im_start|>" read as text is several tokens
    finally:
        tokenizer.split_special_tokens = False
    assert encoded_lengths(tokenizer, TEXTS) == full


def test_a_slow_tokenizer_counts_through_the_library(smollm2):
    from transformers import AutoTokenizer

    from harness.text.tokens import encoded_lengths

    slow = AutoTokenizer.from_pretrained(smollm2, use_fast=False)
    assert encoded_lengths(slow, TEXTS[:3]) == library_lengths(slow, TEXTS[:3], False)


def test_a_long_batch_split_over_threads_counts_as_one_call(tokenizer, monkeypatch):
    from harness.core import threads
    from harness.text import tokens

    texts = [f"{i} " + TEXTS[i % len(TEXTS)] * (1 + i % 3) for i in range(3 * tokens.PARALLEL_MIN_TEXTS + 1)]
    expected = library_lengths(tokenizer, texts, False)
    monkeypatch.setattr(threads, "available_cpus", lambda: 3)
    assert tokens._encoding_threads()[1] == 3
    assert tokens.encoded_lengths(tokenizer, texts) == expected
    monkeypatch.setattr(threads, "available_cpus", lambda: 1)
    assert tokens._encoding_threads() is None
    assert tokens.encoded_lengths(tokenizer, texts) == expected


@pytest.mark.process
def test_a_forked_child_counts_with_threads_of_its_own(tokenizer, monkeypatch):
    import multiprocessing

    from harness.core import threads
    from harness.text import tokens

    texts = [TEXTS[i % 3] for i in range(2 * tokens.PARALLEL_MIN_TEXTS)]
    monkeypatch.setattr(threads, "available_cpus", lambda: 2)
    expected = tokens.encoded_lengths(tokenizer, texts)  # the parent's pool now has threads
    with multiprocessing.get_context("fork").Pool(1) as child:
        # A child using its parent's pool would wait for threads that did not survive the fork.
        assert child.apply_async(tokens.encoded_lengths, (tokenizer, texts)).get(timeout=60) == expected
