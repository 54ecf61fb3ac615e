"""sha256 of the files a run reads, remembered so that an unchanged file is not read again.

A digest is kept under the file's stamp: its absolute path, size, mtime and ctime in nanoseconds (the ctime
changes on every rewrite, even one that restores the mtime, as ``cp -p`` or ``rsync -t`` do). Stamps are kept
for the process and, given a folder (``paths.cache_dir``), in ``file_hashes.json`` there, so the next run finds
the digest of a 300 MB dataset file without reading it. A file changed less than two seconds ago may be
rewritten within the same clock tick with the same size and stamp (git's "racily clean" case): it gets no
stamp and is digested afresh every time. The memo holds the newest ``MAX_ENTRIES`` digests; a damaged or
unwritable memo file is ignored (the file is digested, the run goes on).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import logging
import os
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from harness.core.model_files import read_into

log = logging.getLogger(__name__)

MEMO_FILE = "file_hashes.json"
MAX_ENTRIES = 2000
# A file modified this recently may change again within the same clock tick: never remembered.
SETTLED_NS = 2_000_000_000

_known: dict[str, str] = {}  # stamp -> digest, this process
_saved: set[tuple[str, str]] = set()  # (memo folder, stamp) of the digests found in or written to a memo file


class Tee:
    """Feeds every block to several hash objects: one read of a file gives each of their digests."""

    def __init__(self, *digests: Any) -> None:
        self.digests = digests

    def update(self, block: bytes) -> None:
        for digest in self.digests:
            digest.update(block)


def file_stamp(path: str | Path) -> str | None:
    """The key a file's digest is remembered under, or None for a missing, non-regular or just changed file."""
    absolute = os.path.abspath(path)
    try:
        stat = os.stat(absolute)
    except OSError:
        return None
    if not os.path.isfile(absolute) or time.time_ns() - stat.st_mtime_ns < SETTLED_NS:
        return None
    return f"{absolute}\0{stat.st_size}\0{stat.st_mtime_ns}\0{stat.st_ctime_ns}"


def memo_path(folder: str | Path) -> Path:
    return Path(folder) / MEMO_FILE


def _read_memo(folder: str | Path | None) -> dict[str, str]:
    if folder is None:
        return {}
    try:
        found = json.loads(memo_path(folder).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    digests = found.get("digests") if isinstance(found, dict) else None
    return {k: v for k, v in digests.items() if isinstance(v, str)} if isinstance(digests, dict) else {}


def remembered(stamp: str | None, folder: str | Path | None = None) -> str | None:
    """The digest kept under ``stamp`` by this process or in ``folder``'s memo file, else None."""
    if stamp is None:
        return None
    if stamp in _known and (folder is None or (str(folder), stamp) in _saved):
        return _known[stamp]
    found = _read_memo(folder).get(stamp)
    if found is None:
        return _known.get(stamp)
    _known[stamp] = found
    _saved.add((str(folder), stamp))
    return found


def remember(entries: Mapping[str | None, str], folder: str | Path | None = None) -> None:
    """Keep each digest under its stamp (entries without a stamp are skipped), in ``folder``'s memo too
    unless it holds them already."""
    fresh = {stamp: digest for stamp, digest in entries.items() if stamp is not None}
    _known.update(fresh)
    if folder is not None:
        fresh = {stamp: digest for stamp, digest in fresh.items() if (str(folder), stamp) not in _saved}
    if folder is None or not fresh:
        return
    path = memo_path(folder)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path.with_name(f".{MEMO_FILE}.lock"), "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # the jobs of a parallel launcher write at once
            digests = _read_memo(folder)
            for stamp, digest in fresh.items():
                digests.pop(stamp, None)
                digests[stamp] = digest  # newest last: the oldest are dropped first
            kept = dict(list(digests.items())[-MAX_ENTRIES:])
            tmp = path.with_name(f".{MEMO_FILE}.tmp-{os.getpid()}")
            tmp.write_text(json.dumps({"version": 1, "digests": kept}), encoding="utf-8")
            os.replace(tmp, path)
        _saved.update((str(folder), stamp) for stamp in fresh)
    except OSError as error:  # a read-only cache folder, a file system without locks: digests stay in memory
        log.debug("file digests not remembered in %s: %s", path, error)


def file_sha256(path: str | Path, folder: str | Path | None = None) -> str:
    """The sha256 of the file's bytes (hex), read only when no digest is remembered under its stamp."""
    stamp = file_stamp(path)
    found = remembered(stamp, folder)
    if found is None:
        digest = hashlib.sha256()
        read_into(Path(path), digest)
        found = digest.hexdigest()
    remember({stamp: found}, folder)  # a digest this process found (or computed) joins the memo file
    return found


def files_under(path: Path) -> list[Path]:
    """``path`` itself when it is a file, every file below it (sorted) when it is a folder, else nothing."""
    if path.is_file():
        return [path]
    if path.is_dir():
        return sorted(p for p in path.rglob("*") if p.is_file())
    return []


def stamps_of(paths: Iterable[Path]) -> list[str] | None:
    """The stamps of ``paths``, or None when one has none."""
    stamps = [file_stamp(p) for p in paths]
    return None if any(s is None for s in stamps) else stamps  # type: ignore[return-value]
