"""Which source files a cache entry's code is, derived from the stages' own modules, and their digest.

A stage's code, from the name it asks its fingerprint under (``code_fingerprint(name)``), first rule that
applies:

- ``run``: all of harness bar ``RUN_EXCLUDED`` (analysis, sinks, command line, storage);
- a package or module ``harness.<name>``: ``read`` is every file in harness/read/, ``lm``, ``tree`` likewise;
- a module of harness named ``<name>`` (``encoder`` is harness/retrieve/encoder.py, ``rerank``, ``pools``
  is harness/run/pools.py; storage, analysis and sinks never count); of two such modules the one that asks
  wins, and with neither asking the name is refused as ambiguous;
- the module that asks (``compress``, asked by harness.pack.llmlingua); a dotted ``harness.…`` name is that
  module or package.

To that code the closure adds, transitively: every harness module a covered file imports (lazy imports
included), and the roots a covered module declares in a module-level ``FINGERPRINT_ROOTS`` tuple, the code it
reaches only through config ``_target_`` names (the pool stage instantiates any dataset loader, retriever,
reranker and perturbation; a tree any chat LM). Storage is never followed. So a module added to a stage's
folder joins that stage's fingerprint (and those of the stages that declare or import it) and no other's,
and neither a new module nor a new stage needs an edit here.

Outside code: ``module_fingerprint(name)`` covers a module outside harness that a config's ``_target_``
names (a user's packer ``mypkg.packers.MyPacker``): its source and what it imports of its own top-level
package and of harness, hashed like stage code; an installed distribution (site-packages, the standard
library) by its name and version instead.
"""

from __future__ import annotations

import ast
import hashlib
import importlib.metadata
import importlib.util
import re
import sys
from collections.abc import Iterable, Sequence
from functools import cache
from pathlib import Path
from typing import Any

PACKAGE_DIR = Path(__file__).resolve().parents[1]

# How cache entries are stored (SQLite or PostgreSQL, seals, copying) never changes what they hold; a change
# to their keys (stable_hash) changes the keys themselves. Left out of every fingerprint, so a storage fix
# does not recompute every cache.
STORAGE = "harness.cache"
# The run key covers every stage's code; analysis, the run-time sinks (journal, outputs, W&B), the command line
# and the Python entry that runs its jobs do not change a run's rows.
RUN_EXCLUDED = (
    "harness.report",
    "harness.runlog",
    "harness.stats",
    "harness.cli",
    "harness.__main__",
    "harness.api",
    STORAGE,
)
# The module-level name under which a module declares the code it reaches only through config ``_target_``.
ROOTS_NAME = "FINGERPRINT_ROOTS"


# ---- where modules are --------------------------------------------------------------------------------


def _top_dirs(extra: dict[str, Path] | None = None) -> dict[str, Path]:
    """Top-level package name -> its folder (or single file): harness, plus an outside module's package."""
    return {"harness": PACKAGE_DIR, **(extra or {})}


def _module_file(module: str, tops: dict[str, Path] | None = None) -> Path | None:
    """The source file of a module of a known top-level package (a package's ``__init__.py``), or None."""
    parts = module.split(".")
    top = (tops or _top_dirs()).get(parts[0])
    if top is None:
        return None
    if top.is_file():  # a single-file top-level module has no submodules
        return top if len(parts) == 1 else None
    base = top.joinpath(*parts[1:])
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _module_name(path: Path, tops: dict[str, Path]) -> str:
    for name, top in tops.items():
        if path == top:
            return name
        if top in path.parents:
            parts = [name, *path.relative_to(top).with_suffix("").parts]
            return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
    raise ValueError(f"{path} is in no known package")


def _is_storage(module: str) -> bool:
    return module == STORAGE or module.startswith(STORAGE + ".")


def _package_files(module: str, tops: dict[str, Path] | None = None) -> list[Path]:
    """Every file of a package (sources and data), or the single file of a module."""
    tops = tops or _top_dirs()
    parts = module.split(".")
    top = tops.get(parts[0])
    directory = top.joinpath(*parts[1:]) if top is not None else None
    if directory is not None and directory.is_dir():
        return sorted(
            p
            for p in directory.rglob("*")
            if p.is_file() and "__pycache__" not in p.parts and p.suffix not in (".pyc", ".pyo")
        )
    found = _module_file(module, tops)
    if found is None:
        raise ValueError(f"code fingerprint: no module or package {module!r} under {top or PACKAGE_DIR}")
    return [found]


# ---- what a module reaches ----------------------------------------------------------------------------

_FROM_IMPORT = re.compile(r"^[ \t]*from[ \t]+(\.*[\w.]*)[ \t]+import[ \t]+(\([^)]*\)|[^\n]*)", re.MULTILINE)
_IMPORT = re.compile(r"^[ \t]*import[ \t]+([^\n]+)", re.MULTILINE)


def _imports(path: Path, tops: dict[str, Path] | None = None) -> set[str]:
    """Modules of the known top-level packages a source file imports anywhere (function-level imports
    included).

    Read from the text with two patterns (parsing every module costs about a second); an ``import``
    that only looks like one (inside a string) can add a module, never drop one."""
    tops = tops or _top_dirs()
    module = _module_name(path, tops)
    is_package = path.name == "__init__.py"
    text = path.read_text(encoding="utf-8", errors="replace")
    found: set[str] = set()
    for match in _IMPORT.finditer(text):
        found.update(part.split(" as ")[0].strip() for part in match.group(1).split("#")[0].split(","))
    for match in _FROM_IMPORT.finditer(text):
        source = match.group(1)
        level = len(source) - len(source.lstrip("."))
        if level:
            anchor = module.split(".")
            anchor = anchor[: len(anchor) - level + (1 if is_package else 0)]
            base = ".".join(anchor + ([source.lstrip(".")] if source.lstrip(".") else []))
        else:
            base = source
        found.add(base)
        names = re.sub(r"#[^\n]*", "", match.group(2)).strip("()")
        # ``from harness.data import beir`` imports the submodule harness.data.beir.
        found.update(f"{base}.{name.split(' as ')[0].strip()}" for name in names.split(",") if name.strip())
    return {name for name in found if _module_file(name, tops) is not None}


def declared_roots(path: Path) -> tuple[str, ...]:
    """The harness modules or packages a source file declares in ``FINGERPRINT_ROOTS`` (a literal tuple of
    names at module level), or none. Only a file that mentions the name is parsed."""
    text = path.read_text(encoding="utf-8", errors="replace")
    if ROOTS_NAME not in text:
        return ()
    for node in ast.parse(text, filename=str(path)).body:
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, ast.AnnAssign):
            targets = [node.target]
        else:
            continue
        if any(isinstance(t, ast.Name) and t.id == ROOTS_NAME for t in targets) and node.value is not None:
            roots = ast.literal_eval(node.value)
            if not isinstance(roots, (tuple, list)) or not all(isinstance(r, str) for r in roots):
                raise ValueError(f"{path}: {ROOTS_NAME} must be a tuple of module names, not {roots!r}")
            return tuple(roots)
    return ()


def _closure(roots: Iterable[str], tops: dict[str, Path] | None = None) -> list[Path]:
    """The files of ``roots`` and, transitively, of what they import and declare (storage never)."""
    tops = tops or _top_dirs()
    files: set[Path] = set()
    todo: list[Path] = []

    def add(paths: Iterable[Path]) -> None:
        for path in paths:
            if path not in files:
                files.add(path)
                if path.suffix == ".py":
                    todo.append(path)

    for root in roots:
        add(_package_files(root, tops))
    while todo:
        path = todo.pop()
        for name in _imports(path, tops):
            dep = _module_file(name, tops)
            if dep is not None and not _is_storage(name):
                add([dep])
        for root in declared_roots(path):
            add(_package_files(root, tops))
    return sorted(files)


def files_fingerprint(files: Sequence[Path], base: Path | None = None) -> str:
    """sha256 over the files' paths (relative to ``base``, the harness package by default) and bytes."""
    base = base or PACKAGE_DIR
    digest = hashlib.sha256()
    for path in sorted(files):
        digest.update(path.relative_to(base).as_posix().encode("utf-8") + b"\0")
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


# ---- stages -------------------------------------------------------------------------------------------


def _excluded(module: str) -> bool:
    """Storage, analysis, sinks and the command line: never a stage's code."""
    return any(module == e or module.startswith(e + ".") for e in RUN_EXCLUDED)


def _modules_named(name: str) -> list[str]:
    """The harness modules and packages whose last name is ``name``, bar those that are never stage code."""
    found = []
    for path in PACKAGE_DIR.rglob(name + ".py"):
        found.append(path)
    for path in PACKAGE_DIR.rglob(name):
        if (path / "__init__.py").is_file():
            found.append(path / "__init__.py")
    modules = {_module_name(p, _top_dirs()) for p in found if "__pycache__" not in p.parts}
    return sorted(m for m in modules if not _excluded(m))


def stage_roots(stage: str, asker: str | None = None) -> tuple[str, ...]:
    """The module or package a stage's code starts from (module docstring), ``asker`` being the module
    that asks for the fingerprint."""
    if stage == "run":
        return ("harness",)
    if stage.startswith("harness.") or _module_file(f"harness.{stage}") is not None:
        module = stage if stage.startswith("harness.") else f"harness.{stage}"
        _package_files(module)  # raises for a module that is not there
        return (module,)
    named = _modules_named(stage)
    mine = [m for m in named if asker and (asker == m or asker.startswith(m + "."))]
    if mine or len(named) == 1:
        return ((mine or named)[0],)
    if len(named) > 1:
        raise ValueError(f"stage {stage!r} names several modules ({', '.join(named)}): ask from one of them")
    if asker and _module_file(asker) is not None and not _is_storage(asker):
        return (asker,)
    raise ValueError(f"unknown stage {stage!r} for a code fingerprint: no harness package or module of that name")


def stage_files(stage: str, asker: str | None = None) -> list[Path]:
    """The files a stage's fingerprint covers."""
    if stage == "run":
        excluded = [PACKAGE_DIR.joinpath(*m.split(".")[1:]) for m in RUN_EXCLUDED]
        return [
            p
            for p in _package_files("harness")
            if not any(p == e.with_suffix(".py") or e in p.parents for e in excluded)
        ]
    return _closure(stage_roots(stage, asker))


def stage_fingerprint(stage: str, asker: str | None = None) -> str:
    """sha256 of a stage's code, computed afresh (``code_fingerprint`` keeps it for the process)."""
    return files_fingerprint(stage_files(stage, asker))


@cache
def _roots_fingerprint(roots: tuple[str, ...]) -> str:
    return stage_fingerprint("run") if roots == ("harness",) else files_fingerprint(_closure(roots))


@cache
def _stage_roots(stage: str, asker: str) -> tuple[str, ...]:
    return stage_roots(stage, asker)


def code_fingerprint(stage: str) -> str:
    """sha256 of the code behind one cache (``pools``, ``tree``, ``lm``, ``read``, ``encoder``, ``rerank``,
    ``compress``, or any stage named as the module docstring says) or behind a whole run (``run``):
    computed once per process."""
    asker = sys._getframe(1).f_globals.get("__name__", "")
    return _roots_fingerprint(_stage_roots(stage, asker))


# ---- code outside harness -----------------------------------------------------------------------------


def _installed(path: Path) -> bool:
    """Whether a file belongs to an installed distribution or the standard library (not a source checkout)."""
    if {"site-packages", "dist-packages"} & set(path.parts):
        return True
    stdlib = Path(importlib.util.find_spec("os").origin or "").parent  # pyright: ignore[reportOptionalMemberAccess]
    return stdlib in path.parents


def _distribution(top: str) -> str:
    names = importlib.metadata.packages_distributions().get(top) or []
    versions = sorted(f"{name}=={importlib.metadata.version(name)}" for name in set(names))
    return ",".join(versions) or f"python {sys.version.split()[0]}"


@cache
def module_fingerprint(module: str) -> str:
    """sha256 of an outside module's code: its source and what it imports of its own top-level package and
    of harness; for an installed distribution or the standard library, its name and version. A module that
    cannot be found gets a fixed marker (building it fails on its own). Computed once per process."""
    top = module.split(".")[0]
    spec = importlib.util.find_spec(top)  # a top-level name: finds without importing anything
    if spec is None:
        return f"missing:{module}"
    location = spec.submodule_search_locations
    top_path = Path(next(iter(location))) if location else Path(spec.origin or "")
    if not top_path.exists():
        return f"missing:{module}"
    if top != "harness" and _installed(top_path):
        return f"installed:{_distribution(top)}"
    tops = _top_dirs({top: top_path})
    target = next(
        (m for m in _prefixes(module) if _module_file(m, tops) is not None),
        None,
    )
    if target is None:
        return f"missing:{module}"
    files = _closure([target], tops)
    digest = hashlib.sha256()
    for path in files:
        name = _module_name(path, tops)
        digest.update(name.encode("utf-8") + b"\0" + hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


def _prefixes(dotted: str) -> list[str]:
    """``a.b.C`` -> ``a.b.C``, ``a.b``, ``a``: a ``_target_`` names a module, then a class or function."""
    parts = dotted.split(".")
    return [".".join(parts[:n]) for n in range(len(parts), 0, -1)]


def outside_targets(node: Any) -> list[str]:
    """The ``_target_`` names outside harness anywhere in a resolved config container."""
    found: set[str] = set()

    def walk(value: Any) -> None:
        if isinstance(value, dict):
            target = value.get("_target_")
            if isinstance(target, str) and target and target.split(".")[0] != "harness":
                found.add(target)
            for child in value.values():
                walk(child)
        elif isinstance(value, list):
            for child in value:
                walk(child)

    walk(node)
    return sorted(found)


def outside_code(node: Any) -> dict[str, str]:
    """``_target_`` name -> fingerprint of its module, for each outside ``_target_`` in a config container."""
    return {target: module_fingerprint(target) for target in outside_targets(node)}
