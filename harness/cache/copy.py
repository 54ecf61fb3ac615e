"""Copy a cache between a folder of SQLite files and a PostgreSQL database (either way, or folder to folder).

Stores keep their names (``<file relative to the cache folder>:<table>``), keys and sealed values, so a run
pointed at the copy finds every entry it would have found in the original. Pool entries are files in a folder
(``pools/<key>.npz``) and the ``pools:pools`` store in a database. Every entry is checked while copied as a
run checks it when loading (its seal; for a pool entry also the loader's own checks: a data-only npz, its
recorded key, consistent counts; only regular files are read), and one a run would refuse is left behind and
named in ``Copied.left_behind``; the source is only read, never changed.

Locations are checked before anything is read or written: a URL must be ``postgresql://`` (or
``postgres://``), a folder read from must hold a cache, a folder copied into must be new, empty or a cache, and
a SQLite file that is damaged or not a regular file is a ``LocationError`` naming it.
"""

from __future__ import annotations

import logging
import os
import re
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from harness.cache import files
from harness.cache.postgres import PostgresBackend, is_url, redacted, store_names
from harness.cache.sqlite import SQLiteBackend
from harness.cache.stores import seal, store_name, unseal, unseal_legacy

log = logging.getLogger(__name__)

POOLS = "pools:pools"
BATCH = 500


_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")


class LocationError(ValueError):
    """A location the cache command cannot use (an unsupported URL, not a cache folder, a damaged file)."""


@dataclass
class Copied:
    store: str
    entries: int
    skipped: int = 0
    left_behind: list[str] = field(default_factory=list)  # "<where>: <why>" for each entry not copied


def describe(location: str) -> str:
    return f"database {redacted(location)}" if is_url(location) else f"folder {location}"


def check_location(location: str, use: str = "read") -> None:
    """LocationError unless ``location`` can be used for ``use``: ``read`` (a database, or a folder holding a
    cache), ``write`` (a database, or a folder that is new, empty or a cache) or ``folder`` (a cache folder)."""
    scheme = _SCHEME.match(location)
    if scheme and not is_url(location):
        raise LocationError(
            f"{redacted(location)}: {scheme.group(1)}:// is not a cache location (a cache is a folder of SQLite "
            "files or a postgresql:// URL)"
        )
    if is_url(location):
        if use == "folder":
            raise LocationError(
                f"{redacted(location)}: a database, not a cache folder (reseal works on the SQLite files of a folder)"
            )
        return
    root = Path(location)
    if not root.exists() and not root.is_symlink():
        if use == "write":
            return
        raise LocationError(f"cache folder {root} does not exist")
    if not root.is_dir():
        raise LocationError(f"{root} is not a folder (a cache is a folder of SQLite files or a postgresql:// URL)")
    if use != "write" and not is_cache_folder(root):
        raise LocationError(f"folder {root} holds no cache (no *.sqlite stores, no pools/ folder)")
    if use == "write" and any(root.iterdir()) and not is_cache_folder(root):
        raise LocationError(
            f"folder {root} holds no cache but other files; copy into a new or empty folder, or a cache folder"
        )


def is_cache_folder(root: Path) -> bool:
    return (root / "pools").is_dir() or next(root.rglob("*.sqlite"), None) is not None


def stores(location: str) -> list[str]:
    """The stores held at ``location`` (a cache folder or a postgresql:// URL)."""
    check_location(location)
    if is_url(location):
        return store_names(location)
    root = Path(location)
    absolute = Path(os.path.abspath(root))  # as store_name normalises the files' paths
    names = []
    for path in sorted(root.rglob("*.sqlite")):
        names += [store_name(path, table, root=absolute) for table in _tables(path)]
    if _pool_paths(root):
        names.append(POOLS)
    return names


def read_only(path: Path) -> sqlite3.Connection:
    """``path`` opened so that nothing is written beside it: a copy must not change what it copies. With no
    ``-wal`` log (a store closed cleanly) the file is opened immutable, since even a read-only connection to a
    WAL database creates its ``-shm`` index; with a log, read-only, which reads the log as it is."""
    wal = path.with_name(path.name + "-wal")
    flags = "mode=ro" if wal.exists() else "mode=ro&immutable=1"
    return sqlite3.connect(f"{path.resolve().as_uri()}?{flags}", uri=True)


def _sqlite_batches(path: Path, table: str) -> Iterator[list[tuple[str, bytes]]]:
    """Every entry of one SQLite store in key order, ``BATCH`` at a time, read through :func:`read_only`."""
    try:
        conn = read_only(path)
        try:
            after = ""
            while rows := conn.execute(
                f"SELECT key, value FROM {table} WHERE key > ? ORDER BY key LIMIT ?", (after, BATCH)
            ).fetchall():
                yield [(key, bytes(value)) for key, value in rows]
                after = rows[-1][0]
        finally:
            conn.close()
    except sqlite3.Error as exc:
        raise LocationError(f"cache file {path}: {exc}") from None


def same_location(first: str, second: str) -> bool:
    """Whether two locations name one cache: the same folder (links resolved) or the same database URL."""
    if is_url(first) or is_url(second):
        return first.rstrip("/") == second.rstrip("/")
    return Path(first).resolve() == Path(second).resolve()


def _tables(path: Path) -> list[str]:
    """The tables of one SQLite file, opened read-only; LocationError naming it when it cannot be read."""
    try:
        for name in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
            files.require_regular(name)
        conn = read_only(path)
        try:
            tables = conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
        finally:
            conn.close()
    except files.NotRegularFile as exc:
        raise LocationError(f"cache file {exc}") from None
    except (OSError, sqlite3.Error) as exc:
        raise LocationError(f"cache file {path}: {exc}") from None
    return [table for (table,) in tables if not table.startswith("sqlite_")]


def _pool_paths(root: Path) -> list[Path]:
    """Entry files, not the hidden temporaries a writer killed mid-write leaves (``.<key>.*.tmp.npz``)."""
    return sorted(p for p in (root / "pools").glob("*.npz") if not p.name.startswith("."))


def _pool_files(root: Path, unread: list[str] | None = None) -> Iterator[list[tuple[str, bytes]]]:
    """The pool entries of a folder, sealed as a database holds them; one that cannot be read (a named pipe,
    a folder, a private file) is named in ``unread`` and left out."""
    batch: list[tuple[str, bytes]] = []
    for path in _pool_paths(root):
        try:
            batch.append((path.stem, seal(path.stem, files.read_regular(path))))
        except OSError as exc:
            if unread is None:
                raise
            unread.append(f"{path}: {exc.strerror or exc}")
        if len(batch) == 50:  # pool entries are megabytes each
            yield batch
            batch = []
    if batch:
        yield batch


def entry_batches(location: str, name: str, unread: list[str] | None = None) -> Iterator[list[tuple[str, bytes]]]:
    if is_url(location):
        return PostgresBackend(location, name).batches(BATCH)
    root = Path(location)
    if name == POOLS:
        return _pool_files(root, unread)
    file, table = name.rsplit(":", 1)
    if not table.isidentifier():
        raise LocationError(f"cache file {root / file}: table name {table!r} is not an identifier")
    return _sqlite_batches(root / file, table)


def _writer(location: str, name: str):
    """A function storing one batch of sealed entries; returns how many it skipped as damaged."""
    if is_url(location):
        backend = PostgresBackend(location, name)
        return lambda batch: backend.put_many(dict(batch)) or 0
    root = Path(location)
    if name == POOLS:
        from harness.cache.pools import PoolCache

        pools = PoolCache(root)
        pools.store = None  # a folder destination holds files, whatever cache.url this process has

        def write_files(batch: list[tuple[str, bytes]]) -> int:
            skipped = 0
            for key, value in batch:
                payload = unseal(key, value)
                if payload is None:
                    log.warning("pool entry %s fails its checksum; not copied", key)
                    skipped += 1
                else:
                    pools.write_entry(key, payload)
            return skipped

        return write_files
    file, table = name.rsplit(":", 1)
    if Path(file).is_absolute():
        raise ValueError(f"store {name!r} lies outside its cache folder and has no place in folder {root}")
    backend = SQLiteBackend(root / file, table)
    return lambda batch: backend.put_many(dict(batch)) or 0


def _where(location: str, name: str, key: str) -> str:
    if is_url(location):
        return f"{describe(location)}, store {name}, key {key}"
    if name == POOLS:
        return str(Path(location) / "pools" / f"{key}.npz")
    file, table = name.rsplit(":", 1)
    return f"cache file {Path(location) / file} (table {table}), key {key}"


def _checked(location: str, name: str, batch: list[tuple[str, bytes]], copied: Copied) -> list[tuple[str, bytes]]:
    """The entries of ``batch`` a run would use; the others are named in ``copied.left_behind``."""
    from harness.cache.pools import read_entry

    good = []
    for key, value in batch:
        payload = unseal(key, value)
        if payload is None:
            why = (
                "sealed by an older version (python -m harness.cache reseal on the source keeps it)"
                if unseal_legacy(value) is not None
                else "fails its checksum (damaged, or stored under another key)"
            )
        elif name == POOLS:
            try:
                read_entry(payload, key)  # the loader's own checks, as a run loading it
                why = None
            except Exception as exc:  # noqa: BLE001 - whatever the loader refuses is left behind
                why = f"unusable ({type(exc).__name__}: {exc})"
        else:
            why = None
        if why is None:
            good.append((key, value))
        else:
            copied.left_behind.append(f"{_where(location, name, key)}: {why}")
    return good


def copy_cache(source: str, destination: str, progress: bool = True) -> list[Copied]:
    """Copy every store at ``source`` into ``destination``; entries already there are kept. Each entry is
    checked as a run would check it, and one a run would refuse is left behind (``Copied.left_behind``)."""
    from tqdm.auto import tqdm

    check_location(source, "read")
    check_location(destination, "write")
    if same_location(source, destination):
        raise LocationError(f"copy: the destination {describe(destination)} is the source; name another")
    names = stores(source)
    if not is_url(destination):
        Path(destination).mkdir(parents=True, exist_ok=True)
    done = []
    for name in tqdm(names, desc="stores", unit="store", disable=not progress):
        write = _writer(destination, name)
        copied = Copied(name, 0)
        for batch in entry_batches(source, name, unread=copied.left_behind):
            good = _checked(source, name, batch, copied)
            skipped = write(good)
            copied.entries += len(good) - skipped
        copied.skipped = len(copied.left_behind)
        done.append(copied)
    return done


def reseal(folder: str) -> dict[str, int]:
    """Bind every older-version entry of the SQLite stores under ``folder`` to its key (entries an older
    version wrote were sealed with a digest of the payload alone). Run it once on a cache you trust: it takes
    each such entry to belong under the key it is stored at. Returns the entries resealed per store."""
    check_location(folder, "folder")
    root = Path(folder)
    done = {}
    for name in stores(folder):
        if name == POOLS:
            continue  # pool files carry their key in their own format; an older one is recomputed
        file, table = name.rsplit(":", 1)
        backend = SQLiteBackend(root / file, table)
        count = 0
        for batch in backend.batches(BATCH):
            updated = {}
            for key, value in batch:
                payload = None if unseal(key, value) is not None else unseal_legacy(value)
                if payload is not None:
                    updated[key] = seal(key, payload)
            backend.put_many(updated)  # INSERT OR REPLACE: the resealed value takes the old one's place
            count += len(updated)
        done[name] = count
    return done
