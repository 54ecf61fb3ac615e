"""Budget truncation in the reader's own tokenizer never splits a character."""

from __future__ import annotations

import pytest

from tests.conftest import REPO

SMOLLM2 = REPO / ".cache" / "models" / "SmolLM2-135M-Instruct"

TEXTS = [
    "Zakarian (Armenian: Զաքարյան) was a painter from Yerevan.",
    "東京は日本の首都であり、世界最大の都市圏の一つです。",
    "Mixed: Ἀθῆναι, Москва, 서울 and 北京 in one sentence.",
]


@pytest.fixture(scope="module")
def counters():
    from transformers import AutoTokenizer

    from harness.text.tokens import TokenCounter

    if not (SMOLLM2 / "tokenizer.json").exists():
        pytest.skip(f"the offline reader's tokenizer is not prepared in {SMOLLM2} (make setup)")
    fast = AutoTokenizer.from_pretrained(SMOLLM2)
    assert fast.is_fast
    slow = AutoTokenizer.from_pretrained(SMOLLM2, use_fast=False)
    return {"fast": TokenCounter(fast), "slow": TokenCounter(slow)}


@pytest.mark.parametrize("kind", ["fast", "slow"])
@pytest.mark.parametrize("text", TEXTS)
def test_every_cut_is_a_whole_character_prefix_within_the_budget(counters, kind, text):
    tokens = counters[kind]
    ids = tokens.tokenizer(text, add_special_tokens=False)["input_ids"]
    # The naive cut (decode the first n ids) does split characters somewhere in these texts.
    naive = [tokens.tokenizer.decode(ids[:n]) for n in range(1, len(ids))]
    assert any("\ufffd" in cut for cut in naive)
    previous = ""
    for budget in range(0, len(ids) + 2):
        cut = tokens.truncate(text, budget)
        assert "\ufffd" not in cut
        assert text.startswith(cut)  # a prefix of the original string, so whole characters
        assert tokens.count(cut) <= budget if cut else True
        assert len(cut) >= len(previous)  # more budget never gives a shorter cut
        previous = cut
    assert tokens.truncate(text, len(ids)) == text


def test_armenian_cut_from_the_packing_run(counters):
    # Where a decode cut gave "(Armenian: Զաք\ufffd", the cut now ends on a whole letter.
    tokens = counters["fast"]
    text = TEXTS[0]
    ids = tokens.tokenizer(text, add_special_tokens=False)["input_ids"]
    split = next(n for n in range(1, len(ids)) if tokens.tokenizer.decode(ids[:n]).endswith("\ufffd"))
    assert tokens.tokenizer.decode(ids[:split]) == "Zakarian (Armenian: \ufffd"  # Զ takes tokens 10 and 11
    assert tokens.truncate(text, split) == "Zakarian (Armenian:"  # the trailing space token is stripped
    assert tokens.truncate(text, split + 1) == "Zakarian (Armenian: Զ"
