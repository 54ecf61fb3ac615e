"""A real PostgreSQL server for the cache tests: pgserver's bundled binaries, data in a temporary folder,
reached over a Unix socket, stopped and deleted at the end."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

_numbers = itertools.count()


@contextmanager
def postgres_server(folder: Path) -> Iterator[str]:
    """The URL of a fresh server whose data lives in ``folder`` (which must not exist yet)."""
    import pgserver

    server = pgserver.get_server(folder, cleanup_mode="delete")
    try:
        yield server.get_uri()
    finally:
        server.cleanup()


def new_database(url: str) -> str:
    """Create an empty database on the server at ``url`` and return its URL (one per test that needs
    store names nobody else uses)."""
    import psycopg

    name = f"cache_test_{next(_numbers)}"
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name}")
        conn.execute(f"CREATE DATABASE {name}")
    return urlunsplit(urlsplit(url)._replace(path=f"/{name}"))
