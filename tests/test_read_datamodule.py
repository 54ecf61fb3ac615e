"""Length-sorted prompt batches."""

from __future__ import annotations

import pytest

from harness.read.datamodule import PromptDataModule, length_sorted_batches


def test_batches_are_sorted_longest_first_and_keep_keys_aligned():
    prompts = ["bb", "a", "dddd", "ccc", "eeeee"]
    keys = ["k-bb", "k-a", "k-dddd", "k-ccc", "k-eeeee"]
    batches = length_sorted_batches(prompts, keys, batch_size=2)
    assert [b["prompts"] for b in batches] == [["eeeee", "dddd"], ["ccc", "bb"], ["a"]]
    for batch in batches:
        assert batch["keys"] == [f"k-{p}" for p in batch["prompts"]]


def test_given_lengths_decide_the_order_and_ties_keep_input_order():
    batches = length_sorted_batches(["x", "y", "z"], ["1", "2", "3"], batch_size=3, lengths=[5, 9, 5])
    assert batches == [{"keys": ["2", "1", "3"], "prompts": ["y", "x", "z"]}]


def test_unsorted_batches_keep_input_order():
    batches = length_sorted_batches(["bb", "a", "ccc"], ["1", "2", "3"], batch_size=2, sort_by_length=False)
    assert [b["keys"] for b in batches] == [["1", "2"], ["3"]]


def test_datamodule_loader_yields_the_prebuilt_batches():
    dm = PromptDataModule(["a", "bbb", "cc"], ["1", "2", "3"], batch_size=2)
    dm.setup("predict")
    assert list(dm.predict_dataloader()) == [{"keys": ["2", "3"], "prompts": ["bbb", "cc"]}, {"keys": ["1"], "prompts": ["a"]}]


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"batch_size": 0}, "batch_size"),
        ({"batch_size": 2, "lengths": [1]}, "lengths"),
    ],
)
def test_bad_arguments_are_named(kwargs, message):
    with pytest.raises(ValueError, match=message):
        length_sorted_batches(["a", "b"], ["1", "2"], **kwargs)


def test_key_count_must_match():
    with pytest.raises(ValueError, match="keys"):
        length_sorted_batches(["a", "b"], ["1"], batch_size=1)
