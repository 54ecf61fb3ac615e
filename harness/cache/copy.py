"""Copy a cache between a folder of SQLite files and a PostgreSQL database (either way, or folder to folder).

Stores keep their names (``<file relative to the cache folder>:<table>``), keys and sealed values, so a run
pointed at the copy finds every entry it would have found in the original. Pool entries are files in a folder
(``pools/<key>.npz``) and the ``pools:pools`` store in a database; they are checked while copied, and a
damaged one is left behind with a warning.
"""

from __future__ import annotations

import logging
import os
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from harness.cache.postgres import PostgresBackend, is_url, redacted, store_names
from harness.cache.sqlite import SQLiteBackend
from harness.cache.stores import seal, store_name, unseal, unseal_legacy

log = logging.getLogger(__name__)

POOLS = "pools:pools"
BATCH = 500


@dataclass
class Copied:
    store: str
    entries: int
    skipped: int = 0


def describe(location: str) -> str:
    return f"database {redacted(location)}" if is_url(location) else f"folder {location}"


def stores(location: str) -> list[str]:
    """The stores held at ``location`` (a cache folder or a postgresql:// URL)."""
    if is_url(location):
        return store_names(location)
    root = Path(location)
    if not root.is_dir():
        raise FileNotFoundError(f"cache folder {root} does not exist")
    absolute = Path(os.path.abspath(root))  # as store_name normalises the files' paths
    names = []
    for path in sorted(root.rglob("*.sqlite")):
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
        try:
            tables = conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
        finally:
            conn.close()
        names += [store_name(path, table, root=absolute) for (table,) in tables if not table.startswith("sqlite_")]
    if _pool_paths(root):
        names.append(POOLS)
    return names


def _pool_paths(root: Path) -> list[Path]:
    """Entry files, not the hidden temporaries a writer killed mid-write leaves (``.<key>.*.tmp.npz``)."""
    return sorted(p for p in (root / "pools").glob("*.npz") if not p.name.startswith("."))


def _pool_files(root: Path) -> Iterator[list[tuple[str, bytes]]]:
    batch: list[tuple[str, bytes]] = []
    for path in _pool_paths(root):
        batch.append((path.stem, seal(path.stem, path.read_bytes())))
        if len(batch) == 50:  # pool entries are megabytes each
            yield batch
            batch = []
    if batch:
        yield batch


def entry_batches(location: str, name: str) -> Iterator[list[tuple[str, bytes]]]:
    if is_url(location):
        return PostgresBackend(location, name).batches(BATCH)
    root = Path(location)
    if name == POOLS:
        return _pool_files(root)
    file, table = name.rsplit(":", 1)
    return SQLiteBackend(root / file, table).batches(BATCH)


def _writer(location: str, name: str):
    """A function storing one batch of sealed entries; returns how many it skipped as damaged."""
    if is_url(location):
        backend = PostgresBackend(location, name)
        return lambda batch: backend.put_many(dict(batch)) or 0
    root = Path(location)
    if name == POOLS:
        from harness.pools import PoolCache

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


def copy_cache(source: str, destination: str, progress: bool = True) -> list[Copied]:
    """Copy every store at ``source`` into ``destination``; entries already there are kept."""
    from tqdm.auto import tqdm

    if not is_url(destination):
        Path(destination).mkdir(parents=True, exist_ok=True)
    done = []
    for name in tqdm(stores(source), desc="stores", unit="store", disable=not progress):
        write = _writer(destination, name)
        copied = Copied(name, 0)
        for batch in entry_batches(source, name):
            copied.skipped += write(batch)
            copied.entries += len(batch)
        copied.entries -= copied.skipped
        done.append(copied)
    return done


def reseal(folder: str) -> dict[str, int]:
    """Bind every older-version entry of the SQLite stores under ``folder`` to its key (entries an older
    version wrote were sealed with a digest of the payload alone). Run it once on a cache you trust: it takes
    each such entry to belong under the key it is stored at. Returns the entries resealed per store."""
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
