"""Every diversifier config instantiates through Hydra, with k taken from the root config."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
from hydra import compose, initialize_config_dir
from hydra.utils import instantiate

from harness.diversify.base import Diversifier
from harness.diversify.dpp import DPPDiversifier
from harness.diversify.rule import RuleDiversifier
from tests.test_diversify_helpers import random_pool

REPO = Path(__file__).resolve().parents[1]
NAMES = ["mmr", "maxmin", "dpp", "rng", "rule", "neardup", "vendi"]


@pytest.fixture(scope="module")
def config_dir(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("conf")
    shutil.copytree(REPO / "conf" / "diversifier", root / "diversifier")
    (root / "config.yaml").write_text("defaults:\n  - diversifier: knn\n  - _self_\nk: 4\n")
    return root


def build(config_dir: Path, overrides: list[str]) -> Diversifier:
    with initialize_config_dir(config_dir=str(config_dir), version_base=None):
        return instantiate(compose("config", overrides=overrides).diversifier)


@pytest.mark.parametrize("name", NAMES)
def test_config_instantiates_and_selects_k(config_dir, name):
    diversifier = build(config_dir, [f"diversifier={name}"])
    assert isinstance(diversifier, Diversifier) and diversifier.name == name and diversifier.k == 4
    indices = diversifier.select_indices(random_pool(12, 6, seed=1))
    assert len(indices) == 4 and len(set(np.asarray(indices).tolist())) == 4


def test_rule_inner_diversifier_is_swappable(config_dir):
    rule = build(config_dir, ["diversifier=rule", "diversifier@diversifier.inner=dpp", "k=3"])
    assert isinstance(rule, RuleDiversifier) and isinstance(rule.inner, DPPDiversifier) and rule.inner.k == 3
