"""The "when to diversify" rule: diversify only when the plain kNN selection is redundant.

The kNN top-k is kept unless its Vendi score (its effective number of distinct documents) falls
below tau = min(h, k), where h is the question's evidence count (``pool.example.hops``, or a fixed
``h`` from the config). A question that needs h documents but whose top-k amounts to fewer than h
distinct ones is handed to the configured diversifier D* (MMR by default); any other question
keeps kNN. When the pool holds fewer than k candidates, k in tau is the number actually selected,
since both branches then return the whole pool.

Whether the rule fired is per question, so it is returned with the selection by ``select`` (the
``diversify.rule_*`` row columns), never kept on the object, which is shared across questions.
"""

from __future__ import annotations

import numbers
from collections.abc import Mapping
from typing import Any

import numpy as np

from harness.core.stage import StageInfo
from harness.core.types import Pool
from harness.diversify.base import Diversifier
from harness.diversify.mmr import MMRDiversifier
from harness.diversify.relevance import knn_order, query_similarity
from harness.metrics.diversity import vendi_score

# Vendi equals n exactly for n orthogonal documents, where rounding lands a hair either side of n;
# the tolerance keeps that boundary case from firing the rule by accident.
VENDI_RTOL = 1e-9


def _check_h(h: Any, where: str) -> int:
    if isinstance(h, bool) or not isinstance(h, numbers.Integral) or h < 1:
        raise ValueError(f"{where}: the evidence count h must be a positive integer, got {h!r}")
    return int(h)


class RuleDiversifier(Diversifier):
    shown_settings = ("inner", "h")

    def __init__(self, name: str, k: int, inner: Diversifier | Mapping | None = None, h: int | None = None) -> None:
        super().__init__(name, k)
        if inner is None:
            inner = MMRDiversifier(name="mmr", k=self.k)
        elif isinstance(inner, Mapping):  # a config node that was not instantiated recursively
            from hydra.utils import instantiate

            inner = instantiate(inner)
        if not isinstance(inner, Diversifier):
            raise TypeError(f"diversifier {name!r}: inner must be a Diversifier, got {type(inner).__name__}")
        if inner.k != self.k:
            raise ValueError(
                f"diversifier {name!r}: inner diversifier {inner.name!r} has k={inner.k}, rule has k={self.k}"
            )
        self.inner = inner
        self.h = None if h is None else _check_h(h, f"diversifier {name!r}")

    def evidence_count(self, pool: Pool) -> int:
        if self.h is not None:
            return self.h
        return _check_h(pool.example.hops, f"question {pool.example.question_id!r} (example.hops)")

    def select(self, pool: Pool) -> tuple[np.ndarray, StageInfo]:
        """The selection and {rule_triggered, rule_vendi, rule_tau} for this question."""
        if not pool.candidates:
            return np.empty(0, dtype=np.intp), {"rule_triggered": False, "rule_vendi": float("nan"), "rule_tau": 0}
        knn = knn_order(query_similarity(pool), self.k)
        tau = min(self.evidence_count(pool), knn.size)
        knn_vendi = vendi_score(pool.embeddings[knn])
        triggered = bool(knn_vendi < tau * (1.0 - VENDI_RTOL))
        indices = np.asarray(self.inner.select_indices(pool), dtype=np.intp) if triggered else knn
        return indices, {"rule_triggered": triggered, "rule_vendi": knn_vendi, "rule_tau": tau}

    def select_indices(self, pool: Pool) -> np.ndarray:
        return self.select(pool)[0]
