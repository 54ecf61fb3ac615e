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
    assert list(dm.predict_dataloader()) == [
        {"keys": ["2", "3"], "prompts": ["bbb", "cc"]},
        {"keys": ["1"], "prompts": ["a"]},
    ]


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


@pytest.mark.parametrize("replicas", [2, 3])
@pytest.mark.parametrize("batch_size", [1, 3, 8])
@pytest.mark.parametrize("count", [1, 2, 3, 8, 9, 17])
def test_every_process_gets_a_batch_and_every_prompt_is_read_once(count, batch_size, replicas):
    # Lightning's own prediction sampler deals batch i to rank i % replicas and asserts that every rank
    # gets at least one; the split and the empty padding batches must satisfy it for any read size.
    from pytorch_lightning.overrides.distributed import UnrepeatedDistributedSampler

    prompts = [f"prompt {i} " + "x" * (i % 5) for i in range(count)]
    keys = [f"k{i}" for i in range(count)]
    batches = length_sorted_batches(prompts, keys, batch_size, replicas=replicas)
    assert len(batches) % replicas == 0
    read = []
    for rank in range(replicas):
        sampler = UnrepeatedDistributedSampler(batches, num_replicas=replicas, rank=rank, shuffle=False)
        mine = [batches[i] for i in sampler]
        assert mine, f"rank {rank} got no batch"
        read += [k for batch in mine for k in batch["keys"]]
        assert all(len(batch["keys"]) <= batch_size for batch in mine)
        assert all(batch["prompts"] == [prompts[keys.index(k)] for k in batch["keys"]] for batch in mine)
    assert sorted(read) == sorted(keys)  # each prompt exactly once, padding adds none
    if count >= replicas:  # split rather than padded: every process generates something
        assert all(batches[i]["keys"] for i in range(replicas))


def test_small_reads_split_into_smaller_batches_for_several_processes():
    batches = length_sorted_batches(["a", "b", "c"], ["1", "2", "3"], batch_size=8, sort_by_length=False, replicas=2)
    assert [b["keys"] for b in batches] == [["1", "2"], ["3"]]
    batches = length_sorted_batches(["a"], ["1"], batch_size=8, replicas=2)
    assert [b["keys"] for b in batches] == [["1"], []]
    with pytest.raises(ValueError, match="replicas"):
        length_sorted_batches(["a"], ["1"], batch_size=8, replicas=0)
