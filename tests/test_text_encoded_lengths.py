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
def tokenizer():
    from transformers import AutoTokenizer

    if not (SMOLLM2 / "tokenizer.json").exists():
        pytest.skip(f"the offline reader's tokenizer is not prepared in {SMOLLM2} (make setup)")
    return AutoTokenizer.from_pretrained(SMOLLM2)


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


def test_a_slow_tokenizer_counts_through_the_library():
    from transformers import AutoTokenizer

    from harness.text.tokens import encoded_lengths

    if not (SMOLLM2 / "tokenizer.json").exists():
        pytest.skip(f"the offline reader's tokenizer is not prepared in {SMOLLM2} (make setup)")
    slow = AutoTokenizer.from_pretrained(SMOLLM2, use_fast=False)
    assert encoded_lengths(slow, TEXTS[:3]) == library_lengths(slow, TEXTS[:3], False)
