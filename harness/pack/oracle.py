"""Oracle packing: the best context under the budget, judged with the question's gold record.

An upper reference for the packers, not a method: it reads the answers and gold documents. The best
context maximises, in this order, (1) answer-in-context and (2) gold-document coverage (whole snippets,
as ``harness.metrics.context`` counts them); among equals it takes the cheapest core (packed cost under
``harness.pack.budget``), then the earliest snippets in reading order. The rest of the budget is then
filled with the remaining snippets in rank order, skipping those that do not fit, which can only add to
both criteria.

Support is judged per gold document (``Example.gold_doc_ids``), never per sentence: no supporting
sentences are read, so the oracle is the same for datasets that give them (HotpotQA) and for those that
mark support per paragraph only (MuSiQue, the IRCoT format, where they are unknown).

Exact search. Only a snippet's *signature* matters to the objective: whether it holds an answer and
which gold documents it comes from. For any feasible set, swapping each member for the cheapest
snippet with the same signature keeps the objective and lowers the cost, and a minimal optimal set
needs at most one snippet per gold document plus one for the answer; so the search enumerates subsets
of at most ``|gold| + 1`` distinct signatures, each represented by its cheapest snippet. With one
source per sentence that is a few dozen subsets. When the count would exceed ``max_subsets`` (many
multi-source summary nodes and many gold documents) the packer falls back to a greedy core (cheapest
answer snippet, then most new gold documents per token) and records ``oracle_exact = False``.

Answer presence is judged per snippet (a contiguous run of the normalised answer inside one snippet),
which implies presence in the rendered context; an answer that only appears across the boundary of two
adjacent snippets is not sought.
"""

from __future__ import annotations

import functools
import math
from itertools import combinations

from harness.core.types import Context, Snippet
from harness.metrics.answers import as_answer_list
from harness.metrics.context import answer_in_context
from harness.pack.base import Packer, PackingRequest, in_reading_order
from harness.pack.budget import addable, fits, packed_cost


@functools.lru_cache(maxsize=1 << 16)
def _holds_answer(text: str, answers: tuple[str, ...]) -> bool:
    """Memoised: a sweep hands the oracle the same snippets at every budget and seed."""
    return bool(answer_in_context(text, answers))


def _score(signatures: list[tuple[bool, frozenset[str]]]) -> tuple[int, int]:
    answer = any(a for a, _ in signatures)
    covered = frozenset().union(*(g for _, g in signatures)) if signatures else frozenset()
    return int(answer), len(covered)


class OraclePacker(Packer):
    def __init__(self, name: str = "oracle", max_subsets: int = 100_000, fill: bool = True) -> None:
        super().__init__(name)
        if int(max_subsets) < 0:
            raise ValueError(f"packer {name!r}: max_subsets must be >= 0, got {max_subsets}")
        self.max_subsets = int(max_subsets)
        self.fill = bool(fill)

    def pack(self, request: PackingRequest) -> Context:
        example = request.pool.example
        gold = frozenset(example.gold_doc_ids)
        snippets = request.snippets
        costs = request.costs
        reading = sorted(range(len(snippets)), key=lambda i: (snippets[i].rank, snippets[i].position))
        answers = tuple(as_answer_list(example.answers))
        # Cheapest snippet per signature (ties: earliest in reading order); a snippet alone over budget is out.
        best: dict[tuple[bool, frozenset[str]], int] = {}
        for i in reading:
            if not fits([costs[i]], request.budget):
                continue
            signature = (
                _holds_answer(snippets[i].text, answers),
                frozenset(snippets[i].source_ids) & gold,
            )
            if signature == (False, frozenset()):
                continue
            if signature not in best or costs[i] < costs[best[signature]]:
                best[signature] = i
        keys = sorted(best, key=lambda s: reading.index(best[s]))
        largest = min(len(gold) + 1, len(keys))
        n_subsets = sum(math.comb(len(keys), r) for r in range(largest + 1))
        exact = n_subsets <= self.max_subsets
        core = (
            self._exact(keys, best, costs, request.budget, largest)
            if exact
            else self._greedy(keys, best, costs, request.budget)
        )
        chosen = list(core)
        if self.fill:
            for i in reading:
                if i not in chosen and addable(costs[chosen], costs[i : i + 1], request.budget)[0]:
                    chosen.append(i)
        answer, covered = _score([k for k in keys if best[k] in core])
        extra = {
            "oracle_exact": exact,
            "oracle_subsets": n_subsets,
            "oracle_core": len(core),
            "oracle_answer": float(answer),
            "oracle_gold_covered": covered,
            "packed_cost": packed_cost(costs[chosen]),
        }
        picked: list[Snippet] = in_reading_order([snippets[i] for i in chosen])
        return Context(snippets=picked, budget=request.budget, packer=self.name, extra=extra)

    @staticmethod
    def _exact(keys, best, costs, budget: int, largest: int) -> list[int]:
        top: tuple | None = None
        core: list[int] = []
        for r in range(largest + 1):
            for subset in combinations(range(len(keys)), r):
                members = [best[keys[j]] for j in subset]
                cost = packed_cost(costs[members])
                if cost > budget:
                    continue
                answer, covered = _score([keys[j] for j in subset])
                # larger is better: answer, coverage, then cheaper, then earlier in reading order
                rank = (answer, covered, -cost, [-j for j in subset])
                if top is None or rank > top:
                    top, core = rank, members
        return core

    @staticmethod
    def _greedy(keys, best, costs, budget: int) -> list[int]:
        core: list[int] = []
        answers = [best[k] for k in keys if k[0]]
        if answers:
            cheapest = min(answers, key=lambda i: costs[i])
            core.append(cheapest)
        covered = frozenset().union(*(k[1] for k in keys if best[k] in core)) if core else frozenset()
        while True:
            options = [
                (len(k[1] - covered) / max(int(costs[best[k]]), 1), -int(costs[best[k]]), k)
                for k in keys
                if best[k] not in core
                and k[1] - covered
                and addable(costs[core], costs[best[k] : best[k] + 1], budget)[0]
            ]
            if not options:
                return core
            _, _, key = max(options, key=lambda o: (o[0], o[1]))
            core.append(best[key])
            covered |= key[1]
