"""What a cache entry was computed from: the code of its stage, the content of its inputs, its config.

Code fingerprints
    ``code_fingerprint(stage)`` is a sha256 over the source of the modules a stage's cache entries depend
    on: the stage's packages, every ``harness`` module they import (transitively, lazy imports included),
    and the non-Python files inside the stage's packages (the packaged demo set). Files are hashed byte
    for byte: any edit, a comment included, gives a new fingerprint and the stage's entries are
    recomputed. Ignoring comments would need tokenizing every module on every start (about a second
    of CPU); a spurious recompute after a comment edit is the cheaper error than a missed code change.
    Module paths enter relative to the package, so a copied checkout gets the same fingerprints.
    Computed once per process.

Content
    ``example_digest`` hashes a loaded Example field by field, documents and metadata included, so an
    edited question, answer or passage gets a new key whatever its id. ``input_files_digest`` hashes
    the bytes of the files a dataset config points at (the run key, computed before loading).

Config
    ``identity_config`` is the resolved config with the runtime-only keys removed (logger, paths, cache
    and model folders, progress bars, read chunking, ``cache.force``), resolved with the path roots
    replaced by placeholders so a moved cache or model folder leaves every key unchanged.
"""

from __future__ import annotations

import hashlib
import re
import time
from collections.abc import Iterable, Sequence
from functools import cache
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from harness.cache import stable_hash
from harness.core.model_files import files_signature
from harness.core.types import Document, Example

PACKAGE_DIR = Path(__file__).resolve().parents[1]

# The packages whose code produces each cache's entries (their harness imports are added transitively).
# Retrieval metrics travel inside the pool cache, hence metrics.retrieval; answers depend on the
# generation code only: the prompt they answer is part of the response key already.
STAGE_CODE: dict[str, tuple[str, ...]] = {
    "pools": (
        "harness.run.pools",
        "harness.data",
        "harness.retrieve",
        "harness.perturb",
        "harness.metrics.retrieval",
    ),
    "tree": ("harness.tree", "harness.lm"),
    "lm": ("harness.lm",),
    "read": ("harness.read",),
    "encoder": ("harness.retrieve.encoder",),
    "rerank": ("harness.retrieve.rerank",),
    "compress": ("harness.pack.llmlingua",),
}
# How cache entries are stored (SQLite or PostgreSQL, seals, copying) never changes what they hold; a change
# to their keys (stable_hash) changes the keys themselves. Left out of every fingerprint, so a storage fix
# does not recompute every cache.
STORAGE = "harness.cache"
# The run key covers every stage's code; analysis, the run-time sinks (journal, outputs, W&B) and the
# command line do not change a run's rows.
RUN_EXCLUDED = ("harness.report", "harness.runlog", "harness.stats", "harness.cli", "harness.__main__", STORAGE)

# Top-level keys that say where and how a run executes, never what it computes.
RUNTIME_TOP_KEYS = frozenset({"logger", "paths", "hydra", "read_chunk", "cache", "progress"})
# Keys anywhere in the tree that locate files or drive progress output.
RUNTIME_KEYS = frozenset({"cache_dir", "models_dir", "show_progress"})


# ---- code -------------------------------------------------------------------------------------------


def _module_file(module: str) -> Path | None:
    """The source file of a ``harness`` module (a package's ``__init__.py``), or None if there is none."""
    parts = module.split(".")
    if parts[0] != "harness":
        return None
    base = PACKAGE_DIR.joinpath(*parts[1:])
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _module_name(path: Path) -> str:
    rel = path.relative_to(PACKAGE_DIR).with_suffix("")
    parts = ["harness", *rel.parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _package_files(module: str) -> list[Path]:
    """Every file of a package (sources and data), or the single file of a module."""
    directory = PACKAGE_DIR.joinpath(*module.split(".")[1:])
    if directory.is_dir():
        return sorted(
            p
            for p in directory.rglob("*")
            if p.is_file() and "__pycache__" not in p.parts and p.suffix not in (".pyc", ".pyo")
        )
    found = _module_file(module)
    if found is None:
        raise ValueError(f"code fingerprint: no module or package {module!r} under {PACKAGE_DIR}")
    return [found]


_FROM_IMPORT = re.compile(r"^[ \t]*from[ \t]+(\.*[\w.]*)[ \t]+import[ \t]+(\([^)]*\)|[^\n]*)", re.MULTILINE)
_IMPORT = re.compile(r"^[ \t]*import[ \t]+([^\n]+)", re.MULTILINE)


def _imports(path: Path) -> set[str]:
    """``harness`` modules a source file imports anywhere (function-level imports included).

    Read from the text with two patterns (parsing every module costs about a second); an ``import``
    that only looks like one (inside a string) can add a module, never drop one."""
    module = _module_name(path)
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
    return {name for name in found if name.startswith("harness") and _module_file(name) is not None}


def _closure(roots: Iterable[str]) -> list[Path]:
    files: set[Path] = set()
    for root in roots:
        files.update(_package_files(root))
    todo = [p for p in files if p.suffix == ".py"]
    while todo:
        path = todo.pop()
        for name in _imports(path):
            if name == STORAGE or name.startswith(STORAGE + "."):
                continue
            dep = _module_file(name)
            if dep is not None and dep not in files:
                files.add(dep)
                todo.append(dep)
    return sorted(files)


def files_fingerprint(files: Sequence[Path]) -> str:
    digest = hashlib.sha256()
    for path in sorted(files):
        digest.update(path.relative_to(PACKAGE_DIR).as_posix().encode("utf-8") + b"\0")
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


def stage_files(stage: str) -> list[Path]:
    """The files a stage's fingerprint covers."""
    if stage == "run":
        excluded = [PACKAGE_DIR.joinpath(*m.split(".")[1:]) for m in RUN_EXCLUDED]
        return [
            p
            for p in _package_files("harness")
            if not any(p == e.with_suffix(".py") or e in p.parents for e in excluded)
        ]
    if stage not in STAGE_CODE:
        raise ValueError(f"unknown stage {stage!r} for a code fingerprint; known: run, {', '.join(STAGE_CODE)}")
    return _closure(STAGE_CODE[stage])


@cache
def code_fingerprint(stage: str) -> str:
    """sha256 of the code behind one cache (``pools``, ``tree``, ``lm``, ``read``, ``encoder``, ``rerank``,
    ``compress``)
    or behind a whole run (``run``): computed once per process."""
    return files_fingerprint(stage_files(stage))


# ---- content ----------------------------------------------------------------------------------------


def _document_parts(doc: Document) -> list[Any]:
    return [doc.doc_id, doc.title, list(doc.sentences)]


def example_digests(examples: Sequence[Example]) -> list[str]:
    """One content hash per Example: every field, its documents and its metadata.

    A document collection shared by reference between questions (a BEIR corpus) is hashed once."""
    collections: dict[int, str] = {}
    out = []
    for ex in examples:
        docs = ex.documents
        if id(docs) not in collections:
            collections[id(docs)] = stable_hash([_document_parts(d) for d in docs])
        out.append(
            stable_hash(
                ex.question_id,
                ex.question,
                list(ex.answers),
                list(ex.gold_doc_ids),
                collections[id(docs)],
                ex.hops,
                ex.qtype,
                ex.split,
                ex.dataset,
                ex.metadata,
            )
        )
    return out


def _file_digest(path: Path, digest) -> None:
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)


# (key, path, files_signature) of each named file -> their digest: the jobs of a sweep name the same dataset
# file, read once per process instead of twice per job.
_FILE_DIGESTS: dict[tuple[tuple[str, str, tuple], ...], str] = {}
# A file modified this recently may be rewritten within the same clock tick, same size, same stamp (git's
# "racily clean" case): such a file is digested afresh every time.
_SETTLED_NS = 2_000_000_000


def _file_stamps(named: list[tuple[str, Path]]) -> tuple[tuple[str, str, tuple], ...] | None:
    """The stamps of ``named`` files, or None when one is a folder, missing or just modified."""
    stamps = []
    now = time.time_ns()
    for key, path in named:
        signature = files_signature(path) if path.is_file() else ()
        if not signature or now - signature[0][2] < _SETTLED_NS:  # (name, size, mtime_ns)
            return None
        stamps.append((key, str(path), signature))
    return tuple(stamps)


# Dataset keys that name input files besides ``*_path`` / ``*_file`` (aliases: 2Wiki's id_aliases.json).
_FILE_KEYS = ("path", "aliases")


def input_files_digest(dataset_cfg: Any) -> str:
    """sha256 over the bytes of every existing file (or folder, recursively) a dataset config names
    under a ``path`` / ``aliases`` / ``*_path`` / ``*_file`` key. Relative paths mean the launch directory."""
    from hydra.utils import to_absolute_path

    container = (
        OmegaConf.to_container(dataset_cfg, resolve=True) if isinstance(dataset_cfg, DictConfig) else dataset_cfg
    )
    digest = hashlib.sha256()
    if not isinstance(container, dict):
        return digest.hexdigest()
    named = [
        (key, Path(to_absolute_path(value)))
        for key, value in sorted(container.items())
        if (key in _FILE_KEYS or key.endswith(("_path", "_file"))) and isinstance(value, str) and value
    ]
    stamps = _file_stamps(named)
    if stamps is not None and stamps in _FILE_DIGESTS:
        return _FILE_DIGESTS[stamps]
    for key, path in named:
        digest.update(key.encode("utf-8") + b"\0")
        if path.is_file():
            _file_digest(path, digest)
        elif path.is_dir():
            for sub in sorted(p for p in path.rglob("*") if p.is_file()):
                digest.update(sub.relative_to(path).as_posix().encode("utf-8") + b"\0")
                _file_digest(sub, digest)
        else:
            digest.update(b"<missing>")
    result = digest.hexdigest()
    if stamps is not None:
        _FILE_DIGESTS[stamps] = result
    return result


# ---- config -----------------------------------------------------------------------------------------


def _strip(node: Any) -> Any:
    if isinstance(node, dict):
        return {k: _strip(v) for k, v in node.items() if k not in RUNTIME_KEYS}
    if isinstance(node, list):
        return [_strip(v) for v in node]
    return node


def identity_config(cfg: DictConfig | dict, keys: Sequence[str] | None = None) -> dict[str, Any]:
    """The resolved config (or only ``keys`` of it) without runtime-only keys, independent of where the
    cache and model folders are: the path roots resolve to placeholders, not to real locations."""
    container = OmegaConf.to_container(cfg, resolve=False) if isinstance(cfg, DictConfig) else dict(cfg)
    paths = container.get("paths")
    if isinstance(paths, dict):
        container["paths"] = {name: f"<{name}>" for name in paths}
    resolved = OmegaConf.to_container(OmegaConf.create(container), resolve=True)
    if keys is not None:
        resolved = {key: resolved.get(key) for key in keys}
    return _strip({k: v for k, v in resolved.items() if k not in RUNTIME_TOP_KEYS})
