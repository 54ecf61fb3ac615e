"""The pool store: the data-only disk cache of the pool stage (``harness.run.pools``: retrieve -> rerank ->
retrieval metrics -> perturb).

A cached entry is ``pools/<key>.npz`` under the cache folder (or that npz in the cache database), read with
``allow_pickle=False``: three float32/int64 arrays (candidate embeddings of all pools stacked, per-pool
offsets, query embeddings) and one JSON document (its key, examples, shared document collections, candidates,
retrieval metrics). Nothing in it can run code when loaded, so a cache folder shared with others is safe to
read.

The key (``pool_key``) covers the content of every loaded Example, the retriever, reranker,
perturbation, k and seed config (runtime keys removed), and the code fingerprint of this stage: never
paths or question ids alone. An entry that fails to load or validate, names another key, holds other questions
than the ones the run loaded (an entry whose recorded key was rewritten), or is not a regular file (a named
pipe would block the read), is logged with its path, moved aside as ``<name>.corrupt-<timestamp>`` and
recomputed.
"""

from __future__ import annotations

import io
import json
import logging
import os
import tempfile
from collections.abc import Sequence
from dataclasses import fields
from pathlib import Path
from typing import Any

import numpy as np
from omegaconf import DictConfig

from harness.cache import CacheAccessError, CheckedStore, quarantine, stable_hash
from harness.cache.files import NotRegularFile, current_umask, read_regular
from harness.cache.fingerprint import code_fingerprint, example_digests, identity_config
from harness.cache.stores import configured_url
from harness.core.types import Candidate, Document, Example, Pool

log = logging.getLogger(__name__)

# /2: the entry records the key it was written under.
FORMAT = "harness-pools/2"
POOL_CONFIG_KEYS = ("retriever", "reranker", "perturb", "k", "seed")


# The question digests each key of this process was computed from: an entry loaded for the key must hold them.
_key_questions: dict[str, list[str]] = {}


def pool_key(cfg: DictConfig, examples: Sequence[Example]) -> str:
    """Identity of the pools of ``examples`` under ``cfg`` (see the module docstring)."""
    digests = example_digests(examples)
    key = stable_hash("pools", identity_config(cfg, POOL_CONFIG_KEYS), digests, code_fingerprint("pools"))
    _key_questions[key] = digests
    return key


# ---- JSON with tuples kept as tuples ----------------------------------------------------------------


def _encode(value: Any, where: str) -> Any:
    if isinstance(value, tuple):
        return {"__tuple__": [_encode(v, where) for v in value]}
    if isinstance(value, list):
        return [_encode(v, where) for v in value]
    if isinstance(value, dict):
        if all(isinstance(k, str) and not k.startswith("__") for k in value):
            return {k: _encode(v, where) for k, v in value.items()}
        return {"__items__": [[_encode(k, where), _encode(v, where)] for k, v in value.items()]}
    if isinstance(value, np.generic):
        return value.item()
    if value is None or isinstance(value, (str, bool, int, float)):
        return value
    raise TypeError(f"{where}: {type(value).__name__} value {value!r} has no data-only form")


def _decode(value: Any) -> Any:
    if isinstance(value, list):
        return [_decode(v) for v in value]
    if isinstance(value, dict):
        if set(value) == {"__tuple__"}:
            return tuple(_decode(v) for v in value["__tuple__"])
        if set(value) == {"__items__"}:
            return {_hashable(_decode(k)): _decode(v) for k, v in value["__items__"]}
        return {k: _decode(v) for k, v in value.items()}
    return value


def _hashable(value: Any) -> Any:
    return tuple(_hashable(v) for v in value) if isinstance(value, list) else value


def _record(obj: Any, skip: tuple[str, ...] = ()) -> dict[str, Any]:
    return {f.name: getattr(obj, f.name) for f in fields(obj) if f.name not in skip}


# ---- serialisation ----------------------------------------------------------------------------------


def pools_to_arrays(pools: Sequence[Pool], retrieval: Sequence[dict], key: str = "") -> dict[str, np.ndarray]:
    """The arrays of one cache entry (see the module docstring); TypeError for a value JSON cannot hold."""
    collections: dict[int, int] = {}
    documents: list[list[dict]] = []
    examples, candidates, dtypes = [], [], []
    for pool in pools:
        ex = pool.example
        if id(ex.documents) not in collections:  # a corpus shared by reference is stored once
            collections[id(ex.documents)] = len(documents)
            documents.append([_record(d) for d in ex.documents])
        examples.append({**_record(ex, skip=("documents",)), "documents": collections[id(ex.documents)]})
        candidates.append([_record(c) for c in pool.candidates])
        dtypes.append([str(pool.embeddings.dtype), str(pool.query_embedding.dtype)])
    meta = _encode(
        {
            "format": FORMAT,
            "key": key,
            "collections": documents,
            "examples": examples,
            "candidates": candidates,
            "dtypes": dtypes,
            "retrieval": list(retrieval),
        },
        "pool cache entry",
    )
    dim = int(pools[0].query_embedding.shape[-1]) if pools else 0
    sizes = [len(p.candidates) for p in pools]
    # One dtype wide enough for every pool (float32 in practice); each pool's own dtype is restored on load.
    dtype = np.result_type(np.float32, *(np.dtype(d) for pair in dtypes for d in pair))
    return {
        "meta": np.frombuffer(json.dumps(meta, ensure_ascii=False).encode("utf-8"), dtype=np.uint8),
        "offsets": np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64),
        "embeddings": (
            np.concatenate([np.asarray(p.embeddings, dtype=dtype).reshape(-1, dim) for p in pools])
            if pools
            else np.zeros((0, 0), dtype)
        ),
        "queries": (
            np.stack([np.asarray(p.query_embedding, dtype=dtype) for p in pools]) if pools else np.zeros((0, 0), dtype)
        ),
    }


def pools_from_arrays(arrays: dict[str, np.ndarray], key: str | None = None) -> tuple[list[Pool], list[dict]]:
    """Inverse of ``pools_to_arrays``; ValueError when the entry is inconsistent or (``key`` given) was
    written under another key."""
    meta = _decode(json.loads(arrays["meta"].tobytes().decode("utf-8")))
    if meta.get("format") != FORMAT:
        raise ValueError(f"format {meta.get('format')!r}, expected {FORMAT!r}")
    if key is not None and meta.get("key") != key:
        raise ValueError(
            f"the entry was written for key {meta.get('key')!r}, not this one (copied from another cache?)"
        )
    offsets, embeddings, queries = arrays["offsets"], arrays["embeddings"], arrays["queries"]
    n = len(meta["examples"])
    if not (
        len(meta["candidates"]) == len(meta["dtypes"]) == len(meta["retrieval"]) == len(queries) == n
        and len(offsets) == n + 1
        and int(offsets[-1]) == len(embeddings)
    ):
        raise ValueError("counts of examples, candidates, embeddings and metrics disagree")
    collections = [tuple(Document(**d) for d in docs) for docs in meta["collections"]]
    pools = []
    for i, record in enumerate(meta["examples"]):
        example = Example(**{**record, "documents": collections[record["documents"]]})
        cands = [Candidate(**c) for c in meta["candidates"][i]]
        rows = embeddings[offsets[i] : offsets[i + 1]]
        if len(rows) != len(cands):
            raise ValueError(f"pool {i} ({example.question_id!r}): {len(cands)} candidates, {len(rows)} embeddings")
        emb_dtype, query_dtype = meta["dtypes"][i]
        pools.append(Pool(example, cands, rows.astype(emb_dtype), queries[i].astype(query_dtype)))
    return pools, list(meta["retrieval"])


def read_entry(
    data: bytes, key: str | None = None, questions: Sequence[str] | None = None
) -> tuple[list[Pool], list[dict]]:
    """The pools of one entry's npz bytes, checked as a run checks them (also how ``python -m harness.cache
    copy`` checks the pool entries it copies): ValueError (or the loader's own error) when the entry is
    inconsistent, was written under another key than ``key``, or (``questions`` given: ``example_digests``
    of the questions loaded) holds other questions."""
    with np.load(io.BytesIO(data), allow_pickle=False) as npz:
        arrays = {name: npz[name] for name in ("meta", "offsets", "embeddings", "queries")}
    pools, retrieval = pools_from_arrays(arrays, key)
    if questions is not None:
        held = example_digests([pool.example for pool in pools])
        if held != list(questions):
            differing = next((i for i, (a, b) in enumerate(zip(held, questions, strict=False)) if a != b), None)
            which = (
                f"{len(held)} questions, not {len(questions)}"
                if differing is None
                else f"question {pools[differing].example.question_id!r} differs"
            )
            raise ValueError(
                f"its questions are not the ones loaded for this key ({which}; its recorded key was rewritten?)"
            )
    return pools, retrieval


class PoolCache:
    """Pool entries: ``<cache_dir>/pools/<key>.npz`` files (written atomically, with the process umask, loaded
    without pickle), or the ``pools`` store of the cache database when ``cache.url`` is set (the same npz
    bytes, sealed). Each entry records its key and is refused (moved aside or deleted, recomputed) when that
    key is not the one it was loaded for: a file copied from another cache under this run's name never
    passes for this run's pools."""

    def __init__(self, cache_dir: str | Path) -> None:
        self.dir = Path(cache_dir) / "pools"
        self.store = CheckedStore(self.dir, table="pools") if configured_url() else None

    def path(self, key: str) -> Path:
        return self.dir / f"{key}.npz"

    def where(self, key: str) -> str:
        return str(self.path(key)) if self.store is None else f"{self.store.backend.location}, key {key}"

    def load(self, key: str, examples: Sequence[Example] | None = None) -> tuple[list[Pool], list[dict]] | None:
        """The entry, or None when there is none or it is unusable (then it is set aside and logged).

        Its questions must be ``examples`` (by content), or, when None, the ones ``pool_key`` computed ``key``
        from in this process: an entry whose recorded key was rewritten to this one is refused."""
        try:
            data = self._read(key)
        except NotRegularFile as exc:  # a named pipe or device: set aside as unusable, never opened
            return self._set_aside(key, exc)
        if data is None:
            return None
        questions = example_digests(examples) if examples is not None else _key_questions.get(key)
        try:
            return read_entry(data, key, questions)
        except Exception as exc:  # noqa: BLE001 - any damage means the same: never use it, recompute
            return self._set_aside(key, exc)

    def _set_aside(self, key: str, exc: BaseException) -> None:
        if self.store is None:
            moved = quarantine(self.path(key))
            aside = f"moved to {moved}"
        else:
            self.store.backend.discard(self.store.get_many([key]))
            aside = "deleted"
        log.warning(
            "pool cache entry %s is unusable (%s: %s); %s and recomputing",
            self.where(key),
            type(exc).__name__,
            exc,
            aside,
        )

    def _read(self, key: str) -> bytes | None:
        if self.store is not None:
            return self.store.get_payloads([key], "pool").get(key)
        path = self.path(key)
        try:
            return read_regular(path)
        except FileNotFoundError:
            return None
        except NotRegularFile:
            raise  # set aside by load
        except OSError as exc:  # unreadable (another user's private file, a folder): not damage, never moved
            raise CacheAccessError(f"pool cache entry {path}: {exc.strerror or exc}") from exc

    def save(self, key: str, pools: Sequence[Pool], retrieval: Sequence[dict]) -> str | None:
        try:
            arrays = pools_to_arrays(pools, retrieval, key)
        except TypeError as exc:
            log.warning("pools not cached: %s", exc)
            return None
        buffer = io.BytesIO()
        np.savez(buffer, **arrays)
        return self.write_entry(key, buffer.getvalue())

    def write_entry(self, key: str, data: bytes) -> str:
        """Store one entry's npz bytes under ``key`` (also how ``python -m harness.cache copy`` writes pools)."""
        if self.store is not None:
            self.store.put_payloads({key: data})
            return self.where(key)
        self.dir.mkdir(parents=True, exist_ok=True)
        path = self.path(key)
        # A unique temporary name: jobs on other hosts sharing the folder may write the same key at once.
        fd, tmp = tempfile.mkstemp(prefix=f".{path.stem}.", suffix=".tmp.npz", dir=self.dir)
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
            # mkstemp makes the file private (0600); a cache shared by several users must be readable by all.
            os.chmod(tmp, 0o666 & ~current_umask())
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        return str(path)
