"""The package layering docs/architecture.md draws: stages that generate share the backend layer below them
and never import each other; the backend layer and the text utilities import no stage."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

HARNESS = Path(__file__).resolve().parents[1] / "harness"


def harness_imports(package: str) -> set[tuple[str, str]]:
    """(module file, imported harness module) for every import in ``package``, function-level ones included."""
    found = set()
    for path in sorted((HARNESS / package).rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module]
            elif isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            else:
                continue
            found.update((path.relative_to(HARNESS).as_posix(), n) for n in names if n.startswith("harness."))
    return found


@pytest.mark.parametrize(
    "package, forbidden",
    [
        ("read", ("harness.lm",)),
        ("lm", ("harness.read",)),
        ("text", ("harness.read", "harness.lm")),
        ("backends", ("harness.read", "harness.lm", "harness.tree", "harness.pack", "harness.run.pipeline")),
    ],
)
def test_package_does_not_import(package, forbidden):
    offending = sorted((f, name) for f, name in harness_imports(package) if name.startswith(forbidden))
    assert not offending, f"{package}/ imports across the layering: {offending}"


def test_the_rule_sees_imports():
    # The generating stages do use the backend layer: the check above is not vacuous.
    assert any(name.startswith("harness.backends") for _, name in harness_imports("read"))
    assert any(name.startswith("harness.backends") for _, name in harness_imports("lm"))
