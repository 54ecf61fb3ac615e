"""The package layering docs/architecture.md draws, checked for every package of ``harness``.

Each package may import only the packages named for it below (and itself); the map covers every package,
so a new package fails until its place in the layering is written down. Function-level imports count:
a lazy import is still a dependency.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

HARNESS = Path(__file__).resolve().parents[1] / "harness"

# package -> the harness packages it may import. Read bottom-up: core and cache are the floor, the stages
# sit on the backends and text utilities and never import each other except where one is built on
# another (packers use retrieval's scores and the diversifiers' selections); run composes them all.
ALLOWED: dict[str, set[str]] = {
    "core": set(),
    "cache": {"core"},
    "backends": {"cache", "core"},
    "text": {"backends", "core"},
    "metrics": {"core"},
    "stats": {"metrics"},
    "data": {"text", "core"},
    "retrieve": {"cache", "core"},
    "perturb": {"cache", "retrieve", "core"},
    "diversify": {"metrics", "core"},
    "lm": {"backends", "cache", "core"},
    "tree": {"cache", "lm", "retrieve", "text", "core"},
    "pack": {"backends", "cache", "diversify", "metrics", "retrieve", "text", "core"},
    "read": {"backends", "cache", "text", "core"},
    "report": {"metrics", "stats", "core"},
    # The GPU memory plan reads model configs only; the run's config check asks it before anything loads.
    "plan": {"backends", "core"},
    "runlog": {"cache", "metrics", "report", "stats", "core"},
    "run": {
        "backends",
        "cache",
        "core",
        "data",
        "diversify",
        "lm",
        "metrics",
        "pack",
        "perturb",
        "plan",
        "read",
        "retrieve",
        "runlog",
        "stats",
        "text",
        "tree",
        "api",  # harness/run/__init__.py only: the package is callable, harness.run(overrides) is harness.api.run
    },
    # The entry points at the root.
    "cli": {"run", "cache", "core"},
    "__main__": {"cli"},
    # The Python entry (docs/python.md): the command line's job run in-process, the report's rows and contrasts.
    "api": {"cli", "run", "report", "core"},
    # The configs' ${harness_home:} resolver (harness.core.home) and, on first use, the Python entry's names.
    "__init__": {"core", "api", "run"},
    "preview": {"plan", "run"},  # python -m harness.preview: a sweep's jobs, composed as the run composes them
}


def packages() -> list[str]:
    """Every package of harness/ and every module at its root (by stem)."""
    names = [p.name for p in HARNESS.iterdir() if p.is_dir() and (p / "__init__.py").exists()]
    names += [p.stem for p in HARNESS.glob("*.py")]
    return sorted(names)


def sources(package: str) -> list[Path]:
    folder = HARNESS / package
    return sorted(folder.rglob("*.py")) if folder.is_dir() else [HARNESS / f"{package}.py"]


def imported_packages(package: str) -> set[tuple[str, str]]:
    """(module file, imported harness package) for every import in ``package``, lazy ones included;
    ``from harness import cache`` counts as an import of ``cache``."""
    found = set()
    for path in sources(package):
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                if node.module == "harness":
                    modules = [f"harness.{alias.name}" for alias in node.names]
                else:
                    modules = [node.module]
            elif isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names]
            else:
                continue
            for module in modules:
                parts = module.split(".")
                if parts[0] == "harness" and len(parts) > 1 and parts[1] != package:
                    found.add((path.relative_to(HARNESS).as_posix(), parts[1]))
    return found


def test_every_package_has_a_place_in_the_layering():
    unplaced = sorted(set(packages()) - set(ALLOWED))
    assert not unplaced, f"packages missing from the layering map in {__file__}: {unplaced}"
    gone = sorted(set(ALLOWED) - set(packages()))
    assert not gone, f"the layering map names packages that no longer exist: {gone}"


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_package_imports_only_what_the_layering_allows(package):
    offending = sorted((f, name) for f, name in imported_packages(package) if name not in ALLOWED[package])
    assert not offending, f"{package}/ imports across the layering: {offending}"


def test_the_rule_sees_imports():
    # The scanner finds real imports, lazy and ``from harness import x`` ones included: the check is not vacuous.
    assert ("read", "backends") in {(f.split("/")[0], name) for f, name in imported_packages("read")}
    assert any(name == "cache" for f, name in imported_packages("run") if f == "run/job.py")
    assert any(name == "tree" for _, name in imported_packages("run"))


def module_imports() -> dict[str, set[str]]:
    """Every module of harness (a package by its ``__init__``) -> the harness modules it imports, lazy ones
    included; ``from harness.plan import gpus`` is the module ``harness.plan.gpus``, ``from harness.plan import
    plan_reader`` the package ``harness.plan``."""
    modules = {}
    for path in HARNESS.rglob("*.py"):
        parts = path.relative_to(HARNESS.parent).with_suffix("").parts
        modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path

    def known(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {}
    for module, path in modules.items():
        targets = set()
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Import):
                targets |= {known(a.name) for a in node.names if a.name.startswith("harness.")}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("harness"):
                assert node.module is not None
                for alias in node.names:
                    full = f"{node.module}.{alias.name}"
                    targets.add(full if full in modules else known(node.module))
        graph[module] = {t for t in targets if t and t != module}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_no_module_imports_itself_through_others():
    assert cycles(module_imports()) == []


def test_the_cycle_check_sees_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    graph = module_imports()
    assert "harness.plan.memory" in graph["harness.plan.suggest"]  # lazy and module-level imports both seen
