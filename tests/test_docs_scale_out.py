"""docs/scale-out.md stays true: every `python -m harness` command in it composes (keys, groups and launcher
settings exist), and every test it says runs a command exists."""

from __future__ import annotations

import re

import pytest
from hydra.core.override_parser.overrides_parser import OverridesParser
from omegaconf import OmegaConf

from tests.conftest import REPO, compose_cfg
from tests.helpers.doc_commands import harness_commands, sweep_points

DOC = REPO / "docs" / "scale-out.md"


def commands() -> list[list[str]]:
    return [c.arguments for c in harness_commands((DOC,))]


def test_the_page_has_the_commands_of_every_section():
    assert len(commands()) >= 6


@pytest.mark.parametrize("overrides", commands(), ids=lambda o: " ".join(o)[:60])
def test_each_command_composes(overrides):
    points = sweep_points(overrides)  # a -m line's jobs, each comma-separated value in turn
    for point in points:
        compose_cfg(point, return_hydra_config=True, tiny_reader=False)
    overrides = points[0]
    cfg = compose_cfg(overrides, return_hydra_config=True, tiny_reader=False)
    parser = OverridesParser.create()
    for override in overrides:
        key, _, value = override.lstrip("+").partition("=")
        if key.startswith("hydra.launcher."):
            found = OmegaConf.select(cfg.hydra.launcher, key.removeprefix("hydra.launcher."))
            if OmegaConf.is_list(found):  # a list (setup lines): as Hydra parses the override
                assert OmegaConf.to_container(found) == parser.parse_override(override).value()
            else:
                assert str(found) == value


def test_every_test_it_names_exists():
    named = set(re.findall(r"`(tests/[\w/]+\.py)(?:::(\w+))?`", DOC.read_text()))
    assert named
    for path, name in named:
        source = (REPO / path).read_text()
        assert not name or f"def {name}(" in source, f"{path}::{name}"
