"""The Vendi rule: fires only when the kNN top-k has fewer than min(h, k) effective documents."""

from __future__ import annotations

import numpy as np
import pytest
from omegaconf import OmegaConf

from harness.core.types import Pool
from harness.diversify.dpp import DPPDiversifier
from harness.diversify.knn import KNNDiversifier
from harness.diversify.mmr import MMRDiversifier
from harness.diversify.rule import RuleDiversifier
from tests.test_diversify_helpers import pool_from_arrays, unit


def redundant_pool(hops: int) -> Pool:
    # Top 3 by relevance (cosine .707) are copies of one vector (Vendi 1); two distinct documents (cosine .6,
    # orthogonal to the copies) rank below them, so MMR at lambda .7 takes one: .7 * .6 > .7 * .707 - .3.
    embeddings = unit([[1, 1, 0, 0], [1, 1, 0, 0], [1, 1, 0, 0], [0.6, -0.6, 0.529, 0], [0.6, -0.6, 0, 0.529]])
    return pool_from_arrays(embeddings, [1.0, 0.0, 0.0, 0.0], hops=hops)


def distinct_pool(hops: int) -> Pool:
    # Orthogonal documents at decreasing relevance: the top 3 have Vendi exactly 3.
    return pool_from_arrays(np.eye(4), unit([4.0, 3.0, 2.0, 1.0]), hops=hops)


def test_rule_fires_on_a_redundant_top_k_and_returns_the_inner_selection():
    pool = redundant_pool(hops=2)
    rule = RuleDiversifier("rule", 3)
    indices, info = rule.select(pool)
    # Vendi of three identical vectors is 1 < tau = min(2, 3) = 2.
    assert info["rule_triggered"] is True and info["rule_tau"] == 2
    assert info["rule_vendi"] == pytest.approx(1.0)
    assert indices.tolist() == MMRDiversifier("mmr", 3).select_indices(pool).tolist()
    assert indices.tolist() != KNNDiversifier("knn", 3).select_indices(pool).tolist()


def test_rule_keeps_knn_when_the_top_k_is_diverse_enough():
    pool = distinct_pool(hops=3)
    indices, info = RuleDiversifier("rule", 3).select(pool)
    assert info["rule_triggered"] is False
    assert info["rule_vendi"] == pytest.approx(3.0)  # not below tau = 3
    assert indices.tolist() == KNNDiversifier("knn", 3).select_indices(pool).tolist()


def test_single_hop_questions_never_trigger():
    indices, info = RuleDiversifier("rule", 3).select(redundant_pool(hops=1))
    assert info["rule_triggered"] is False and info["rule_tau"] == 1  # Vendi >= 1 always
    assert indices.tolist() == [0, 1, 2]


def test_configured_h_overrides_the_example_hops():
    pool = redundant_pool(hops=1)
    indices, info = RuleDiversifier("rule", 3, h=3).select(pool)
    assert info["rule_triggered"] is True and info["rule_tau"] == 3
    assert RuleDiversifier("rule", 3, h=3).select_indices(pool).tolist() == indices.tolist()


def test_the_decision_is_per_question_not_kept_on_the_object():
    rule = RuleDiversifier("rule", 3)
    first = rule.select(redundant_pool(hops=2))[1]["rule_triggered"]
    second = rule.select(distinct_pool(hops=2))[1]["rule_triggered"]
    assert (first, second) == (True, False)
    assert not hasattr(rule, "last_triggered")


def test_inner_diversifier_can_be_any_diversifier_or_a_config_node():
    pool = redundant_pool(hops=3)
    rule = RuleDiversifier("rule", 3, inner=DPPDiversifier("dpp", 3))
    assert rule.select_indices(pool).tolist() == DPPDiversifier("dpp", 3).select_indices(pool).tolist()
    node = OmegaConf.create({"_target_": "harness.diversify.mmr.MMRDiversifier", "name": "mmr", "k": 3, "lambda_": 0.2})
    assert RuleDiversifier("rule", 3, inner=node).inner.lambda_ == 0.2


def test_rule_rejects_a_mismatched_inner_k_and_bad_h():
    with pytest.raises(ValueError, match="has k=4, rule has k=3"):
        RuleDiversifier("rule", 3, inner=MMRDiversifier("mmr", 4))
    with pytest.raises(ValueError, match="evidence count h"):
        RuleDiversifier("rule", 3, h=0)
    with pytest.raises(ValueError, match="example.hops"):
        RuleDiversifier("rule", 3).select_indices(redundant_pool(hops=0))


def test_tau_uses_the_selection_size_when_the_pool_is_smaller_than_k():
    pool = distinct_pool(hops=5)  # four orthogonal candidates, Vendi 4, k = 6
    indices, info = RuleDiversifier("rule", 6).select(pool)
    assert info["rule_tau"] == 4 and info["rule_triggered"] is False
    assert np.array_equal(indices, [0, 1, 2, 3])
