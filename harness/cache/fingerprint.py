"""What a cache entry was computed from: the code of its stage, the content of its inputs, its config.

Code fingerprints (``harness.cache.stage_code``)
    ``code_fingerprint(stage)`` is a sha256 over the source of the modules a stage's cache entries depend
    on: the stage's package or module (derived from the stage's name, or from the module that asks), every
    ``harness`` module it imports (transitively, lazy imports included), the packages its modules declare
    in ``FINGERPRINT_ROOTS`` (what they reach only through config ``_target_`` names) and the
    non-Python files inside those packages (the packaged demo set). Files are hashed byte for byte: any
    edit, a comment included, gives a new fingerprint and the stage's entries are recomputed. Ignoring
    comments would need tokenizing every module on every start (about a second of CPU); a spurious
    recompute after a comment edit is the cheaper error than a missed code change.
    Module paths enter relative to the package, so a copied checkout gets the same fingerprints.
    Computed once per process.

Content
    ``example_digest`` hashes a loaded Example field by field, documents and metadata included, so an
    edited question, answer or passage gets a new key whatever its id. ``input_files_digest`` hashes
    the bytes of the files a dataset config points at (the run key, computed before loading), remembered
    under the files' size and modification stamps (``harness.cache.file_hashes``).

Config
    ``identity_config`` is the resolved config with the runtime-only keys removed (logger, paths, cache
    and model folders, progress bars, read chunking, ``cache.force``), resolved with the path roots
    replaced by placeholders so a moved cache or model folder leaves every key unchanged. A ``_target_``
    outside harness (a user's ``mypkg.packers.MyPacker``) adds its module's fingerprint
    (``module_fingerprint``), so the run key and the pool key follow that code too.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from harness.cache import file_hashes, stable_hash
from harness.cache.stage_code import (
    PACKAGE_DIR,
    RUN_EXCLUDED,
    STORAGE,
    code_fingerprint,
    files_fingerprint,
    module_fingerprint,
    outside_code,
    stage_files,
    stage_fingerprint,
)
from harness.core.types import Document, Example

__all__ = [
    "PACKAGE_DIR",
    "RUN_EXCLUDED",
    "STORAGE",
    "code_fingerprint",
    "example_digests",
    "files_fingerprint",
    "identity_config",
    "input_files",
    "input_files_digest",
    "module_fingerprint",
    "outside_code",
    "stage_files",
    "stage_fingerprint",
]

# Top-level keys that say where and how a run executes, never what it computes.
RUNTIME_TOP_KEYS = frozenset({"logger", "paths", "hydra", "read_chunk", "cache", "progress"})
# The identity's entry for the code of outside ``_target_`` names; no config group starts with an underscore.
OUTSIDE_CODE_KEY = "_outside_code"
# Keys anywhere in the tree that locate files or drive progress output.
RUNTIME_KEYS = frozenset({"cache_dir", "models_dir", "show_progress"})


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
    file_hashes.read_into(path, digest)


# Dataset keys that name input files besides ``*_path`` / ``*_file`` (aliases: 2Wiki's id_aliases.json).
_FILE_KEYS = ("path", "aliases")


def input_files(dataset_cfg: Any) -> list[tuple[str, Path]]:
    """(key, absolute path) of every file or folder a dataset config names under a ``path`` / ``aliases`` /
    ``*_path`` / ``*_file`` key, by key. Relative paths mean the launch directory."""
    from hydra.utils import to_absolute_path

    container = (
        OmegaConf.to_container(dataset_cfg, resolve=True) if isinstance(dataset_cfg, DictConfig) else dataset_cfg
    )
    if not isinstance(container, dict):
        return []
    return [
        (key, Path(to_absolute_path(value)))
        for key, value in sorted(container.items())
        if (key in _FILE_KEYS or key.endswith(("_path", "_file"))) and isinstance(value, str) and value
    ]


def _inputs_stamp(named: list[tuple[str, Path]]) -> str | None:
    """What the digest of ``named`` is remembered under: each file's stamp (``harness.cache.file_hashes``),
    None when one is just modified or there are none (nothing to read)."""
    if not named:
        return None
    parts: list[Any] = []
    for key, path in named:
        if not path.exists():
            parts.append([key, str(path), "<missing>"])
            continue
        stamps = file_hashes.stamps_of(file_hashes.files_under(path))
        if stamps is None:
            return None
        parts.append([key, str(path), stamps])
    return "inputs\0" + stable_hash(parts)


def input_files_digest(dataset_cfg: Any, folder: str | Path | None = None) -> str:
    """sha256 over the bytes of every existing file (or folder, recursively) of :func:`input_files`.

    Remembered under the files' stamps, for the process and in ``folder``'s memo (``paths.cache_dir``): the
    jobs of a sweep and the next run find it without reading the files. Each file's own sha256 is taken in
    the same read and remembered too (a run's record of the data it read, ``harness.run.data_record``)."""
    named = input_files(dataset_cfg)
    stamp = _inputs_stamp(named)
    found = file_hashes.remembered(stamp, folder)
    if found is not None:
        file_hashes.remember({stamp: found}, folder)
        return found
    digest = hashlib.sha256()
    own: dict[str | None, str] = {}
    for key, path in named:
        digest.update(key.encode("utf-8") + b"\0")
        if path.is_dir():
            for sub in file_hashes.files_under(path):
                digest.update(sub.relative_to(path).as_posix().encode("utf-8") + b"\0")
                own[file_hashes.file_stamp(sub)] = _digest_both(sub, digest)
        elif path.is_file():
            own[file_hashes.file_stamp(path)] = _digest_both(path, digest)
        else:
            digest.update(b"<missing>")
    result = digest.hexdigest()
    file_hashes.remember({**own, stamp: result}, folder)
    return result


def _digest_both(path: Path, digest) -> str:
    """Feed ``path`` to ``digest`` and return the file's own sha256, from one read."""
    own = hashlib.sha256()
    _file_digest(path, file_hashes.Tee(digest, own))
    return own.hexdigest()


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
    identity = _strip({k: v for k, v in resolved.items() if k not in RUNTIME_TOP_KEYS})
    # Code outside harness that the config builds (a user's packer) is no stage's code: its fingerprint
    # joins the config. Only when there is some, so every other key stays what it was.
    code = outside_code(identity)
    if code:
        identity[OUTSIDE_CODE_KEY] = code
    return identity
