"""The PostgreSQL backend of the cache stores, for a cache shared by many hosts (``cache.url``).

Every store lives in one table, ``harness_cache (store, key, value)``, with ``(store, key)`` unique. A write
is one transaction of ``INSERT ... ON CONFLICT DO NOTHING`` rows: a writer killed mid-write leaves nothing
half-written, and writers racing on a key keep the first value (values of one key are computed the same way
by every writer). A connection error is retried a few times with a short back-off, then reported as a
``CacheAccessError`` that names the server (password hidden); it never falls back to a local file, which
would silently split a cache that is meant to be shared.
"""

from __future__ import annotations

import logging
import math
import os
import re
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from typing import TypeVar
from urllib.parse import urlsplit

from harness.cache.errors import CacheAccessError

log = logging.getLogger(__name__)

T = TypeVar("T")
TABLE = "harness_cache"
SCHEMES = ("postgresql", "postgres")
RETRIES = 3
CHUNK = 1000
# Seconds a server may take to answer before the run stops, retries included (``cache.connect_timeout_s``):
# one that accepts the connection and never answers would otherwise hold every attempt for libpq's timeout.
CONNECT_TIMEOUT_S = 5.0
# libpq's floor: a smaller connect_timeout counts as 2 seconds.
LIBPQ_MIN_TIMEOUT_S = 2


def is_url(location: str | os.PathLike | None) -> bool:
    return isinstance(location, str) and urlsplit(location).scheme in SCHEMES


# libpq's connection strings, wherever they occur in a text (a message, an override list, a log line):
# the password of a URL's userinfo (which ends at the first "@" or "/": libpq splits there; Hydra's sweep
# lines escape colons and equals signs, postgresql\://u\:SECRET@host), the ``password``
# query parameter of a URL (up to the next "&" or "#"), and the ``password`` keyword of the key/value form,
# quoted ('...' with backslash escapes) or not (up to the next blank).
_URL_USERINFO = re.compile(r"(?i)(\bpostgres(?:ql)?\\?://[^:@/\s]*:)[^@/\s]*(?=@)")
_QUERY_PASSWORD = re.compile(r"([?&]password\\?=)[^&#\s]*")
_KEYWORD_PASSWORD = re.compile(r"(?<![?&\w.])(password\s*\\?=\s*)(?:'(?:[^'\\]|\\.)*'?|\S+)")
MASK = "***"


def redacted(text: str) -> str:
    """``text`` with every password of a libpq connection string in it replaced by ``***`` (for messages,
    logs, rows and saved configs). Every form libpq accepts is masked:

    - the userinfo of a URL: ``postgresql://user:SECRET@host/db`` (``postgres://`` too, and inside a longer
      text such as an error message or Hydra's override list);
    - the ``password`` query parameter: ``postgresql://user@host/db?sslmode=require&password=SECRET``;
    - the key/value form: ``host=dbhost password=SECRET dbname=harness`` (``password = 'SE CRET'`` too).

    ``passfile=PATH`` (URL parameter or keyword) is left as is: it names the file libpq reads the password
    from (``~/.pgpass`` by default), a path and not a secret, and where to look is useful in a message.
    """
    if not isinstance(text, str) or "password" not in text.lower() and "://" not in text:
        return text
    text = _URL_USERINFO.sub(rf"\g<1>{MASK}", text)
    text = _QUERY_PASSWORD.sub(rf"\g<1>{MASK}", text)
    return _KEYWORD_PASSWORD.sub(rf"\g<1>{MASK}", text)


def redacted_config(container: dict) -> dict:
    """A copy of a resolved config (``OmegaConf.to_container(cfg, resolve=True)``) with ``cache.url`` and
    every other string that holds a connection string's password masked by :func:`redacted`, for files and
    loggers (config.yaml, W&B) that must never hold the password."""

    def mask(value):
        if isinstance(value, dict):
            return {key: mask(item) for key, item in value.items()}
        if isinstance(value, (list, tuple)):
            return [mask(item) for item in value]
        return redacted(value) if isinstance(value, str) else value

    return mask(container)


class PostgresBackend:
    """One store (``store``) of the shared table in the database at ``url``."""

    def __init__(self, url: str, store: str, connect_timeout_s: float = CONNECT_TIMEOUT_S) -> None:
        self._open(url, store, connect_timeout_s)

    # Pickling carries only the location: each process (ddp_spawn workers) opens its own connection.
    def __getstate__(self) -> dict:
        return {"url": self.url, "store": self.store, "connect_timeout_s": self.connect_timeout_s}

    def __setstate__(self, state: dict) -> None:
        self._open(state["url"], state["store"], state.get("connect_timeout_s", CONNECT_TIMEOUT_S))

    def _open(self, url: str, store: str, connect_timeout_s: float) -> None:
        self.url, self.store, self.connect_timeout_s = url, store, connect_timeout_s
        self._run(lambda conn: None)  # connect now: an unreachable server is an error at start, not mid-run

    @property
    def location(self) -> str:
        return f"cache database {redacted(self.url)} (store {self.store})"

    def _run(self, operation: Callable[[object], T]) -> T:
        """``operation(connection)`` on this process's connection to the server (shared by every store, so a
        job holds one connection however many stores it opens), under its lock; connection errors are
        retried with a short back-off, then reported."""
        import psycopg

        shared = _shared(self.url)
        deadline = time.monotonic() + self.connect_timeout_s
        with shared.lock:
            for attempt in range(RETRIES + 1):
                remaining = deadline - time.monotonic()
                try:
                    return operation(shared.connection(max(LIBPQ_MIN_TIMEOUT_S, math.ceil(remaining))))
                except psycopg.OperationalError as exc:
                    shared.drop()
                    pause = 0.2 * 2**attempt
                    out_of_time = time.monotonic() + pause >= deadline
                    if attempt == RETRIES or out_of_time:
                        waited = f"no answer within cache.connect_timeout_s={self.connect_timeout_s:g} s, retries "
                        raise CacheAccessError(
                            f"{self.location}: {str(exc).strip()} ({waited + 'included; ' if out_of_time else ''}"
                            "is the server running and reachable? cache.url or HARNESS_CACHE_URL chooses it; unset, "
                            "the cache is SQLite files under paths.cache_dir)"
                        ) from exc
                    log.warning("%s: %s; retrying", self.location, str(exc).strip().splitlines()[0])
                    time.sleep(pause)
        raise AssertionError("unreachable")

    def get_many(self, keys: Iterable[str]) -> dict[str, bytes]:
        keys = list(dict.fromkeys(keys))

        def select(conn) -> dict[str, bytes]:
            found: dict[str, bytes] = {}
            for start in range(0, len(keys), CHUNK):
                rows = conn.execute(
                    f"SELECT key, value FROM {TABLE} WHERE store = %s AND key = ANY(%s)",
                    (self.store, keys[start : start + CHUNK]),
                ).fetchall()
                found.update((k, bytes(v)) for k, v in rows)
            return found

        return self._run(select) if keys else {}

    def put_many(self, items: dict[str, bytes]) -> None:
        self._for_each(f"INSERT INTO {TABLE} (store, key, value) VALUES (%s, %s, %s) ON CONFLICT DO NOTHING", items)

    def discard(self, items: dict[str, bytes]) -> None:
        """Delete these entries if they still hold these values (a damaged value, not a concurrent rewrite)."""
        self._for_each(f"DELETE FROM {TABLE} WHERE store = %s AND key = %s AND value = %s", items)

    def _for_each(self, statement: str, items: dict[str, bytes]) -> None:
        """``statement`` over (store, key, value) of every item, in one transaction."""
        if not items:
            return
        rows = [(self.store, k, v) for k, v in items.items()]

        def execute(conn) -> None:
            with conn.transaction(), conn.cursor() as cur:
                cur.executemany(statement, rows)

        self._run(execute)

    def batches(self, size: int = 500) -> Iterator[list[tuple[str, bytes]]]:
        """Every entry, in key order, ``size`` at a time (for copying a cache)."""
        after = ""
        while True:
            rows = self._run(
                lambda conn, after=after: conn.execute(
                    f"SELECT key, value FROM {TABLE} WHERE store = %s AND key > %s ORDER BY key LIMIT %s",
                    (self.store, after, size),
                ).fetchall()
            )
            if not rows:
                return
            yield [(k, bytes(v)) for k, v in rows]
            after = rows[-1][0]

    def __len__(self) -> int:
        return self._run(
            lambda conn: conn.execute(f"SELECT COUNT(*) FROM {TABLE} WHERE store = %s", (self.store,)).fetchone()[0]
        )

    def close(self) -> None:
        """The connection is the process's, shared with the other stores: it closes when the process ends."""


def store_names(url: str) -> list[str]:
    """The stores held in the database at ``url``."""
    backend = PostgresBackend(url, "")
    return sorted(backend._run(lambda conn: [r[0] for r in conn.execute(f"SELECT DISTINCT store FROM {TABLE}")]))


class _SharedConnection:
    """One autocommit connection per (process, URL), opened on first use and again after a fork or an error."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.lock = threading.Lock()
        self._conn = None
        self._pid = None

    def connection(self, timeout_s: int):
        """The open connection, else a new one that must answer within ``timeout_s`` (libpq's bound on the
        whole start: the TCP connect, the startup exchange and authentication)."""
        if self._conn is None or self._pid != os.getpid() or self._conn.closed:
            import psycopg

            conn = psycopg.connect(self.url, autocommit=True, connect_timeout=timeout_s)
            try:
                conn.execute(
                    f"CREATE TABLE IF NOT EXISTS {TABLE} "
                    "(store TEXT NOT NULL, key TEXT NOT NULL, value BYTEA NOT NULL, PRIMARY KEY (store, key))"
                )
            except psycopg.errors.UniqueViolation:
                pass  # another process created the table between the check and the create
            self._conn, self._pid = conn, os.getpid()
        return self._conn

    def drop(self) -> None:
        if self._conn is not None and self._pid == os.getpid():
            try:
                self._conn.close()
            except Exception:  # noqa: BLE001 - a broken connection may fail to close; it is dropped either way
                pass
        self._conn = None


_connections: dict[str, _SharedConnection] = {}
_connections_lock = threading.Lock()


def _shared(url: str) -> _SharedConnection:
    with _connections_lock:
        if url not in _connections:
            _connections[url] = _SharedConnection(url)
        return _connections[url]
