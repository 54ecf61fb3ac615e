"""`make lint`'s site build is a check that can fail: the Makefile's own mkdocs command, run as written, builds
the documentation and stops on a dead link (mkdocs' --quiet would hide the warnings strict mode counts)."""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.conftest import REPO

MKDOCS = Path(sys.executable).parent / "mkdocs"


def lint_mkdocs_command() -> list[str]:
    """The mkdocs line of the Makefile's lint target, as words (``$(VENV)/bin/mkdocs`` this venv's)."""
    makefile = (REPO / "Makefile").read_text()
    lint = makefile[makefile.index("\nlint:") :].split("\n\n")[0]
    line = next(x.strip() for x in lint.splitlines() if x.startswith("\t") and "mkdocs build" in x)
    words = shlex.split(line)
    assert words[0] == "$(VENV)/bin/mkdocs", line
    return [str(MKDOCS), *words[1:]]


def build(command: list[str], config: Path, site: Path) -> subprocess.CompletedProcess:
    at = command.index("--site-dir")
    command = [*command[:at], "--site-dir", str(site), *command[at + 2 :], "--config-file", str(config)]
    return subprocess.run(command, capture_output=True, text=True, timeout=120, cwd=REPO)


@pytest.mark.process
def test_the_lint_site_build_passes_on_the_docs_and_stops_on_a_dead_link(tmp_path):
    command = lint_mkdocs_command()
    assert "--strict" in command and "--quiet" not in command and "-q" not in command
    assert build(command, REPO / "mkdocs.yml", tmp_path / "site").returncode == 0

    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "index.md").write_text("# Home\n\nThe [viewer](../outputs/studies/x/viewer.html) of a study.\n")
    config = yaml.safe_load((REPO / "mkdocs.yml").read_text())
    config.update(docs_dir=str(docs), nav=[{"Home": "index.md"}])
    (tmp_path / "mkdocs.yml").write_text(yaml.safe_dump(config))
    broken = build(command, tmp_path / "mkdocs.yml", tmp_path / "broken-site")
    assert broken.returncode != 0
    said = broken.stdout + broken.stderr
    assert "../outputs/studies/x/viewer.html" in said and "Aborted with 1 warnings in strict mode" in said
