"""docs/scale-out.md stays true: every `python -m harness` command in it composes (keys, groups and launcher
settings exist), and every test it says runs a command exists."""

from __future__ import annotations

import re
import shlex

import pytest
from omegaconf import OmegaConf

from tests.conftest import REPO, compose_cfg

DOC = REPO / "docs" / "scale-out.md"


def commands() -> list[list[str]]:
    found = []
    for block in re.findall(r"```bash\n(.*?)```", DOC.read_text(), flags=re.S):
        for line in block.splitlines():
            line = line.split("#")[0].strip()
            if line.startswith("python -m harness "):
                found.append(shlex.split(line)[3:])
    return found


def test_the_page_has_the_commands_of_every_section():
    assert len(commands()) >= 6


@pytest.mark.parametrize("overrides", commands(), ids=lambda o: " ".join(o)[:60])
def test_each_command_composes(overrides):
    overrides = [o for o in overrides if o != "-m"]
    cfg = compose_cfg(overrides, return_hydra_config=True, tiny_reader=False)
    for override in overrides:
        key, _, value = override.lstrip("+").partition("=")
        if key.startswith("hydra.launcher."):
            assert str(OmegaConf.select(cfg.hydra.launcher, key.removeprefix("hydra.launcher."))) == value


def test_every_test_it_names_exists():
    named = set(re.findall(r"`(tests/[\w/]+\.py)(?:::(\w+))?`", DOC.read_text()))
    assert named
    for path, name in named:
        source = (REPO / path).read_text()
        assert not name or f"def {name}(" in source, f"{path}::{name}"
