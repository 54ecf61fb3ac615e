"""The SQLite backend of the cache stores: one table of ``key -> bytes`` in one file.

SQLite in WAL mode: every write is committed before the call returns, so a run killed at any
moment keeps what it computed, and several sweep jobs can share one cache file. A damaged file (not a
database, or a malformed page) is never used: it is logged, moved aside as ``<name>.corrupt-<timestamp>``
and the store starts afresh, so what it held is recomputed.

The file and its ``-wal`` and ``-shm`` are created by the store before SQLite opens them, with mode
``0o666 & ~umask`` (SQLite itself would make them 0644 whatever the umask), so a cache folder shared by a
group at umask 002 is writable by every member. A named pipe or device where one of them belongs is an error
naming it, never opened (a read from it would block the run forever).
"""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from datetime import datetime
from pathlib import Path
from typing import TypeVar

from harness.cache import files
from harness.cache.errors import CacheAccessError
from harness.cache.network_fs import journal_mode

log = logging.getLogger(__name__)

T = TypeVar("T")
LOCKED_RETRY_SECONDS = 60.0


def _retried_while_locked(statement: Callable[[], T]) -> T:
    """``statement`` retried while another process holds the file: SQLite answers a journal-mode switch, and a
    WAL file's first use while another connection recovers it, with "database is locked" at once, without
    waiting on the connection's busy timeout (two runs opening one new cache at the same moment met it)."""
    deadline = time.monotonic() + LOCKED_RETRY_SECONDS
    pause = 0.01
    while True:
        try:
            return statement()
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(pause)
            pause = min(pause * 2, 0.5)


# SQLite result codes for damage (SQLITE_CORRUPT, SQLITE_NOTADB); busy or I/O errors are not damage.
_DAMAGE_CODES = {11, 26}


def quarantine(path: str | Path) -> Path | None:
    """Move a damaged cache file aside as ``<name>.corrupt-<timestamp>`` (kept for inspection); None if
    it is already gone (another process moved it first)."""
    path = Path(path)
    target = path.with_name(f"{path.name}.corrupt-{datetime.now().strftime('%Y%m%dT%H%M%S%f')}")
    try:
        os.replace(path, target)
    except FileNotFoundError:
        return None
    return target


def is_damage(exc: sqlite3.DatabaseError) -> bool:
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None:
        return (code & 0xFF) in _DAMAGE_CODES
    message = str(exc)
    return "malformed" in message or "not a database" in message


class SQLiteBackend:
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
        self._conn = None
        with self._lock:
            self._guarded(lambda: None)

    def _connect(self) -> None:
        # WAL on a local disk; a network filesystem gets the rollback journal, or an error (harness.cache_fs).
        mode = journal_mode(self.path.parent)
        self._create_files(mode)
        conn = sqlite3.connect(str(self.path), timeout=60, check_same_thread=False)
        self._conn = conn
        # The file this connection holds: a recovery moves it aside only if nobody replaced it already.
        self._identity = self._file_identity()
        _retried_while_locked(lambda: conn.execute(f"PRAGMA journal_mode={mode}"))
        conn.execute("PRAGMA synchronous=NORMAL")
        _retried_while_locked(
            lambda: conn.execute(f"CREATE TABLE IF NOT EXISTS {self.table} (key TEXT PRIMARY KEY, value BLOB)")
        )
        conn.commit()
        # Reads the schema page: a file that is not a database fails here. Damage deeper in the file shows
        # on the lookup that reaches it (scanning the whole index at every start would be slow on big caches).
        conn.execute("SELECT name FROM sqlite_master").fetchall()

    def _create_files(self, mode: str) -> None:
        """The database (and in WAL mode its log and index) as regular files with the umask's mode."""
        names = [self.path] + ([self.side("-wal"), self.side("-shm")] if mode == "WAL" else [])
        try:
            for name in names:
                if not files.require_regular(name):
                    files.create(name)
        except IsADirectoryError:
            pass  # SQLite's own error ("unable to open database file") names it below
        except files.NotRegularFile as exc:
            raise CacheAccessError(f"cache file {exc}; remove it or choose another paths.cache_dir") from None
        except OSError as exc:
            raise CacheAccessError(
                f"cache file {exc.filename or self.path}: {exc.strerror or exc} (is its folder writable? "
                "paths.cache_dir / HARNESS_CACHE_DIR choose another)"
            ) from exc

    def side(self, suffix: str) -> Path:
        """The file beside the database SQLite names with ``suffix`` (``-wal``, ``-shm``)."""
        return self.path.with_name(self.path.name + suffix)

    def _file_identity(self) -> tuple[int, int] | None:
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return None
        return st.st_dev, st.st_ino

    def _guarded(self, operation: Callable[[], T]) -> T:
        """Run ``operation`` (lock held) on a healthy connection; on damage, recover once and retry."""
        try:
            if self._conn is None:
                self._connect()
            return operation()
        except sqlite3.DatabaseError as exc:
            if not is_damage(exc):
                # sqlite's own messages ("unable to open database file", "attempt to write a readonly
                # database") never say which file: name it and the setting that moves it.
                raise CacheAccessError(
                    f"cache file {self.path}: {exc} (is its folder writable? paths.cache_dir / HARNESS_CACHE_DIR "
                    "choose another)"
                ) from exc
            self._recover(exc)
            self._connect()
            return operation()

    def _recover(self, exc: sqlite3.DatabaseError) -> None:
        if self._conn is not None:
            try:
                self._conn.close()
            except sqlite3.Error:
                pass
            self._conn = None
        if self._file_identity() != self._identity:
            log.warning(
                "cache file %s was damaged (%s) and has been replaced by another process; reopening", self.path, exc
            )
            return
        moved = quarantine(self.path)
        for suffix in ("-wal", "-shm"):  # the log and index of the damaged file belong to it
            side = self.path.with_name(self.path.name + suffix)
            if side.exists():
                quarantine(side)
        log.warning(
            "cache file %s is damaged (%s); moved to %s and starting a fresh one (entries are recomputed)",
            self.path,
            exc,
            moved,
        )

    def get_many(self, keys: Iterable[str]) -> dict[str, bytes]:
        keys = list(dict.fromkeys(keys))

        def select() -> dict[str, bytes]:
            found: dict[str, bytes] = {}
            for start in range(0, len(keys), 500):
                chunk = keys[start : start + 500]
                marks = ",".join("?" * len(chunk))
                rows = self._conn.execute(
                    f"SELECT key, value FROM {self.table} WHERE key IN ({marks})", chunk
                ).fetchall()
                found.update(rows)
            return found

        with self._lock:
            return self._guarded(select)

    def put_many(self, items: dict[str, bytes]) -> None:
        if not items:
            return

        def insert() -> None:
            try:
                self._conn.executemany(
                    f"INSERT OR REPLACE INTO {self.table} (key, value) VALUES (?, ?)", list(items.items())
                )
                self._conn.commit()
            except sqlite3.DatabaseError:
                self._conn.rollback()
                raise

        with self._lock:
            self._guarded(insert)

    def discard(self, items: dict[str, bytes]) -> None:
        """Delete these entries if they still hold these values (a damaged value, not a concurrent rewrite)."""
        if not items:
            return

        def delete() -> None:
            self._conn.executemany(f"DELETE FROM {self.table} WHERE key = ? AND value = ?", list(items.items()))
            self._conn.commit()

        with self._lock:
            self._guarded(delete)

    def batches(self, size: int = 500) -> Iterator[list[tuple[str, bytes]]]:
        """Every entry, in key order, ``size`` at a time (for copying a cache)."""
        after = ""
        while True:
            with self._lock:
                rows = self._guarded(
                    lambda after=after: self._conn.execute(
                        f"SELECT key, value FROM {self.table} WHERE key > ? ORDER BY key LIMIT ?", (after, size)
                    ).fetchall()
                )
            if not rows:
                return
            yield [(k, bytes(v)) for k, v in rows]
            after = rows[-1][0]

    @property
    def location(self) -> str:
        return f"cache file {self.path}"

    def __len__(self) -> int:
        with self._lock:
            return self._guarded(lambda: self._conn.execute(f"SELECT COUNT(*) FROM {self.table}").fetchone()[0])

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None
