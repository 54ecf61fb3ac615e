"""Durable on-disk key-value stores for embeddings and reader responses.

SQLite in WAL mode: every write is committed before the call returns, so a run killed at any
moment keeps what it computed, and several sweep jobs can share one cache file.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
from collections.abc import Iterable
from pathlib import Path

import numpy as np


def stable_hash(*parts: object) -> str:
    """sha256 over the JSON form of ``parts``: the same inputs give the same key on any machine."""
    payload = json.dumps(parts, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


class KeyValueStore:
    """A table of ``key -> bytes`` in one SQLite file."""

    def __init__(self, path: str | Path, table: str = "kv") -> None:
        self._open(path, table)

    # Pickling carries only the location, so a store can travel to spawned worker processes
    # (Lightning's ddp_spawn) and each process opens its own connection to the same file.
    def __getstate__(self) -> dict:
        return {"path": str(self.path), "table": self.table}

    def __setstate__(self, state: dict) -> None:
        self._open(state["path"], state["table"])

    def _open(self, path: str | Path, table: str) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if not table.isidentifier():
            raise ValueError(f"table name {table!r} is not an identifier")
        self.table = table
        self._lock = threading.Lock()
        self._conn = sqlite3.connect(str(self.path), timeout=60, check_same_thread=False)
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute("PRAGMA synchronous=NORMAL")
        self._conn.execute(f"CREATE TABLE IF NOT EXISTS {table} (key TEXT PRIMARY KEY, value BLOB)")
        self._conn.commit()

    def get_many(self, keys: Iterable[str]) -> dict[str, bytes]:
        keys = list(dict.fromkeys(keys))
        found: dict[str, bytes] = {}
        with self._lock:
            for start in range(0, len(keys), 500):
                chunk = keys[start : start + 500]
                marks = ",".join("?" * len(chunk))
                rows = self._conn.execute(
                    f"SELECT key, value FROM {self.table} WHERE key IN ({marks})", chunk
                ).fetchall()
                found.update(rows)
        return found

    def put_many(self, items: dict[str, bytes]) -> None:
        if not items:
            return
        with self._lock:
            self._conn.executemany(
                f"INSERT OR REPLACE INTO {self.table} (key, value) VALUES (?, ?)", list(items.items())
            )
            self._conn.commit()

    def __bool__(self) -> bool:
        # An empty store is still a store: without this, ``if store:`` would be False until first write.
        return True

    def __len__(self) -> int:
        with self._lock:
            return self._conn.execute(f"SELECT COUNT(*) FROM {self.table}").fetchone()[0]

    def close(self) -> None:
        with self._lock:
            self._conn.close()


class ArrayStore(KeyValueStore):
    """float32 vectors keyed by hash (the embedding cache)."""

    def get_arrays(self, keys: Iterable[str]) -> dict[str, np.ndarray]:
        return {k: np.frombuffer(v, dtype=np.float32) for k, v in self.get_many(keys).items()}

    def put_arrays(self, items: dict[str, np.ndarray]) -> None:
        self.put_many({k: np.ascontiguousarray(v, dtype=np.float32).tobytes() for k, v in items.items()})


class TextStore(KeyValueStore):
    """JSON values keyed by hash (the reader-response and LM-call cache)."""

    def get_texts(self, keys: Iterable[str]) -> dict[str, object]:
        return {k: json.loads(v) for k, v in self.get_many(keys).items()}

    def put_texts(self, items: dict[str, object]) -> None:
        self.put_many({k: json.dumps(v, ensure_ascii=False).encode("utf-8") for k, v in items.items()})
