import math

import numpy as np
import pytest

from harness.core.types import Candidate, Example, Pool
from harness.metrics import all_gold_at_k, recall_at_k, retrieval_metrics

# d1 retrieved twice (a near-duplicate copy), d2 only inside a summary node at rank 4
RANKED = [("d1",), ("d1",), ("d3",), ("d2", "d4"), ("d5",)]
GOLD = ("d1", "d2")


@pytest.mark.parametrize(
    ("k", "recall", "all_gold"),
    [(1, 0.5, 0.0), (2, 0.5, 0.0), (3, 0.5, 0.0), (4, 1.0, 1.0), (5, 1.0, 1.0), (100, 1.0, 1.0)],
)
def test_recall_and_all_gold_with_copies(k, recall, all_gold):
    assert recall_at_k(RANKED, GOLD, k) == recall
    assert all_gold_at_k(RANKED, GOLD, k) == all_gold


def test_plain_id_lists_and_edge_cases():
    assert recall_at_k(["d1", "d1", "d2"], ["d1", "d2", "d3"], 2) == pytest.approx(1 / 3)
    assert recall_at_k(["d1", "d1", "d2"], ["d1", "d2", "d3"], 3) == pytest.approx(2 / 3)
    assert math.isnan(recall_at_k(RANKED, (), 3))
    assert math.isnan(all_gold_at_k(RANKED, (), 3))
    assert recall_at_k([], GOLD, 3) == 0.0
    for bad in (0, -1, 2.5, True):
        with pytest.raises(ValueError, match="k must be a positive integer"):
            recall_at_k(RANKED, GOLD, bad)


def test_retrieval_metrics_on_pool():
    example = Example(question_id="q", question="?", answers=("x",), gold_doc_ids=GOLD, documents=())
    candidates = [Candidate(cand_id=f"c{i}", text="t", source_ids=ids) for i, ids in enumerate(RANKED)]
    pool = Pool(example, candidates, np.zeros((len(candidates), 2), np.float32), np.zeros(2, np.float32))
    assert retrieval_metrics(pool, 3) == {"recall_at_k": 0.5, "all_gold_at_k": 0.0}
    assert retrieval_metrics(pool, 4) == {"recall_at_k": 1.0, "all_gold_at_k": 1.0}
