"""The one feasibility rule every packer obeys.

The pipeline renders chosen snippets joined by a newline, so a set ``S`` of snippets costs the sum of
their reader-token counts plus one token per separator:

    packed_cost(S) = sum(cost_i for i in S) + max(|S| - 1, 0)

and ``S`` is feasible iff ``packed_cost(S) <= budget``. ``fits`` states the rule; ``addable`` is the same
rule, vectorised over candidates, for greedy loops that grow a feasible set one snippet at a time.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

#: reader tokens charged for the newline between two rendered snippets
SEPARATOR_TOKENS = 1


def packed_cost(costs: Sequence[int] | np.ndarray) -> int:
    """Reader tokens of snippets with these costs once joined by separators."""
    costs = np.asarray(costs, dtype=np.int64)
    if costs.size == 0:
        return 0
    return int(costs.sum()) + SEPARATOR_TOKENS * (costs.size - 1)


def fits(costs: Sequence[int] | np.ndarray, budget: int) -> bool:
    """True iff snippets with these reader-token ``costs`` fit the ``budget`` once joined."""
    return packed_cost(costs) <= budget


def addable(chosen_costs: Sequence[int] | np.ndarray, candidate_costs: np.ndarray, budget: int) -> np.ndarray:
    """Boolean mask: may each candidate be added to the chosen set without breaking ``fits``?

    Adding ``x`` to a non-empty ``S`` adds ``cost_x`` plus one separator, so this equals
    ``[fits(list(chosen_costs) + [c], budget) for c in candidate_costs]``.
    """
    chosen_costs = np.asarray(chosen_costs, dtype=np.int64)
    separator = SEPARATOR_TOKENS if chosen_costs.size else 0
    return packed_cost(chosen_costs) + separator + np.asarray(candidate_costs, dtype=np.int64) <= budget


def room(chosen_costs: Sequence[int] | np.ndarray, budget: int) -> int:
    """Reader tokens left for one more snippet after ``chosen_costs``, its separator already paid.

    The largest ``c`` with ``addable(chosen_costs, [c], budget)`` true (negative when nothing more fits),
    so a fragment cut to ``room`` tokens obeys the same rule as a whole snippet.
    """
    chosen_costs = np.asarray(chosen_costs, dtype=np.int64)
    separator = SEPARATOR_TOKENS if chosen_costs.size else 0
    return int(budget - packed_cost(chosen_costs) - separator)


def room_after(left: int, cost: int) -> int:
    """``room`` once a snippet of ``cost`` joins a set whose room was ``left``: the same rule kept as a running
    figure, for greedy loops that test one candidate at a time (``cost <= left`` is ``addable``)."""
    return int(left - cost - SEPARATOR_TOKENS)
