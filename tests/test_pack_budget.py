"""The one feasibility rule: sum of costs plus one token per newline separator."""

from __future__ import annotations

import numpy as np
import pytest

from harness.pack.budget import addable, fits, packed_cost, room, room_after


@pytest.mark.parametrize(
    "costs, expected",
    [([], 0), ([7], 7), ([3, 4], 8), ([1, 1, 1, 1], 7), ([0, 0], 1)],
)
def test_packed_cost_counts_separators(costs, expected):
    assert packed_cost(costs) == expected


def test_fits_is_inclusive_at_the_budget():
    assert fits([3, 4], 8)
    assert not fits([3, 4], 7)
    assert fits([], 0)
    assert not fits([1], 0)
    assert not fits([], -1)


def test_addable_agrees_with_fits_everywhere():
    rng = np.random.default_rng(0)
    for _ in range(300):
        chosen = rng.integers(0, 20, size=int(rng.integers(0, 6))).tolist()
        candidates = rng.integers(0, 30, size=12)
        budget = int(rng.integers(-2, 90))
        mask = addable(chosen, candidates, budget)
        assert mask.tolist() == [fits(chosen + [int(c)], budget) for c in candidates]


def test_a_running_room_is_room_of_the_set_and_its_comparison_is_addable():
    rng = np.random.default_rng(1)
    for _ in range(200):
        budget = int(rng.integers(-2, 90))
        chosen: list[int] = []
        left = room(chosen, budget)
        assert left == budget
        for cost in rng.integers(0, 30, size=6).tolist():
            assert (cost <= left) == bool(addable(chosen, [cost], budget)[0])
            chosen.append(cost)
            left = room_after(left, cost)
            assert left == room(chosen, budget)
