"""The cache stores the stages use (embeddings, reader and LM responses, trees, compressions, reranker
scores, pools), over either backend.

A store is named by its file under the cache folder and its table (``responses.sqlite``, table
``responses``). Unconfigured, or with ``cache.url`` unset, it is that SQLite file; with ``cache.url`` a
``postgresql://`` URL, it is the store ``<file relative to paths.cache_dir>:<table>`` of that database. The
names, keys and values are the same in both, so ``python -m harness.cache copy`` moves a cache between them.

Every value is sealed with a 16-byte BLAKE2b digest of its key and payload: a damaged value (a flipped byte
the backend does not notice) or a value stored under another entry's key fails the check, is logged, deleted
and recomputed instead of served.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Protocol

import numpy as np

from harness.cache import network_fs
from harness.cache.postgres import CONNECT_TIMEOUT_S, PostgresBackend, is_url
from harness.cache.sqlite import SQLiteBackend

log = logging.getLogger(__name__)

DIGEST = 16

_url: str | None = None
_root: Path | None = None
_connect_timeout_s = CONNECT_TIMEOUT_S


class Backend(Protocol):
    location: str

    def get_many(self, keys: Iterable[str]) -> dict[str, bytes]: ...
    def put_many(self, items: dict[str, bytes]) -> None: ...
    def discard(self, items: dict[str, bytes]) -> None: ...
    def batches(self, size: int = 500) -> Iterator[list[tuple[str, bytes]]]: ...
    def __len__(self) -> int: ...
    def close(self) -> None: ...


def configure(
    url: str | None = None,
    cache_dir: str | Path | None = None,
    network_fs_policy: str = "fallback",
    connect_timeout_s: float = CONNECT_TIMEOUT_S,
) -> None:
    """Where the stores opened from now on live: the database at ``url`` (which must answer within
    ``connect_timeout_s``, retries included), else SQLite files."""
    global _url, _root, _connect_timeout_s
    if url and not is_url(url):
        raise ValueError(f"cache.url must be a postgresql:// URL or unset, got {url!r}")
    _url = url or None
    _root = None if cache_dir is None else Path(os.path.abspath(cache_dir))
    _connect_timeout_s = connect_timeout_s
    network_fs.set_policy(network_fs_policy)


def configured_url() -> str | None:
    return _url


def store_name(path: str | Path, table: str, root: Path | None = None) -> str:
    """``<path relative to the cache folder>:<table>`` (the absolute path when outside it)."""
    path = Path(os.path.abspath(path))
    root = _root if root is None else root
    if root is not None and path.is_relative_to(root):
        path = path.relative_to(root)
    return f"{path.as_posix()}:{table}"


def open_backend(path: str | Path, table: str) -> Backend:
    if _url:
        return PostgresBackend(_url, store_name(path, table), _connect_timeout_s)
    return SQLiteBackend(path, table)


def seal(key: str, payload: bytes) -> bytes:
    return payload + _digest(key, payload)


def unseal(key: str, value: bytes) -> bytes | None:
    """The payload of a sealed value, or None when it fails its check."""
    return _checked_payload(value, lambda payload: _digest(key, payload))


def unseal_legacy(value: bytes) -> bytes | None:
    """The payload of a value sealed by an older version (a digest of the payload alone), or None."""
    return _checked_payload(value, lambda payload: hashlib.blake2b(payload, digest_size=DIGEST).digest())


def _checked_payload(value: bytes, digest: Callable[[bytes], bytes]) -> bytes | None:
    """The payload before the trailing digest when ``digest(payload)`` reproduces it, else None."""
    payload = bytes(value[:-DIGEST])
    if len(value) <= DIGEST or digest(payload) != bytes(value[-DIGEST:]):
        return None
    return payload


def _digest(key: str, payload: bytes) -> bytes:
    return hashlib.blake2b(key.encode("utf-8") + b"\0" + payload, digest_size=DIGEST).digest()


class CheckedStore:
    """Sealed values over a backend (see the module docstring)."""

    def __init__(self, path: str | Path, table: str = "kv") -> None:
        self.path, self.table = Path(path), table
        self.backend = open_backend(path, table)

    # Raw access (sealed values) for copying and for tests that damage a value on purpose.
    def get_many(self, keys: Iterable[str]) -> dict[str, bytes]:
        return self.backend.get_many(keys)

    def put_many(self, items: dict[str, bytes]) -> None:
        self.backend.put_many(items)

    def __len__(self) -> int:
        return len(self.backend)

    def __bool__(self) -> bool:
        # An empty store is still a store: without this, ``if store:`` would be False until first write.
        return True

    def close(self) -> None:
        self.backend.close()

    def get_payloads(self, keys: Iterable[str], what: str = "") -> dict[str, bytes]:
        found, damaged, legacy = {}, {}, []
        for key, value in self.backend.get_many(keys).items():
            payload = unseal(key, value)
            if payload is not None:
                found[key] = payload
            elif unseal_legacy(value) is not None:
                legacy.append(key)
            else:
                damaged[key] = value
        if legacy:
            # Left in place (a recomputed value replaces each one), so ``reseal`` can still keep the rest.
            log.warning(
                "%s: %d %s entries were sealed by an older version, before entries were bound to their keys; "
                "recomputing them (python -m harness.cache reseal CACHE_FOLDER keeps every such entry instead)",
                self.backend.location,
                len(legacy),
                what or "cache",
            )
        if damaged:
            first = next(iter(damaged))
            log.warning(
                "%s: %d %s entries fail their checksum (damaged, or stored under another key; first: %s); "
                "recomputing them",
                self.backend.location,
                len(damaged),
                what or "cache",
                first,
            )
            self.backend.discard(damaged)
        return found

    def put_payloads(self, items: dict[str, bytes]) -> None:
        self.backend.put_many({key: seal(key, payload) for key, payload in items.items()})


class ArrayStore(CheckedStore):
    """float32 vectors keyed by hash (the embedding cache)."""

    def get_arrays(self, keys: Iterable[str]) -> dict[str, np.ndarray]:
        found = {}
        for key, payload in self.get_payloads(keys, "vector").items():
            if not payload or len(payload) % 4:
                log.warning("%s: entry %s is not a float32 vector; recomputing it", self.backend.location, key)
                continue
            found[key] = np.frombuffer(payload, dtype=np.float32)
        return found

    def put_arrays(self, items: dict[str, np.ndarray]) -> None:
        self.put_payloads({k: np.ascontiguousarray(v, dtype=np.float32).tobytes() for k, v in items.items()})


class TextStore(CheckedStore):
    """JSON values keyed by hash (reader responses, LM calls, trees, compressions, reranker scores)."""

    def get_texts(self, keys: Iterable[str]) -> dict[str, object]:
        found = {}
        for key, payload in self.get_payloads(keys, "JSON").items():
            try:
                found[key] = json.loads(payload)
            except ValueError as exc:  # bad JSON or bad UTF-8 under a valid checksum: written damaged
                log.warning("%s: entry %s is not valid JSON (%s); recomputing it", self.backend.location, key, exc)
        return found

    def put_texts(self, items: dict[str, object]) -> None:
        self.put_payloads({k: json.dumps(v, ensure_ascii=False).encode("utf-8") for k, v in items.items()})
