"""One verified download: pooch's HTTP downloader into a partial file that resumes, then sha256, then rename.

A file becomes visible at its destination only once its hash is checked: bytes go to ``DEST.part`` (appended
to with an HTTP Range request when an earlier transfer was cut), the whole is hashed, and only then renamed
into place. A hash that differs removes the partial file and names the file, the hash expected and the hash
got. A destination folder is locked while a file is fetched, so two jobs that fetch the same file at once
take turns instead of writing into one partial file.
"""

from __future__ import annotations

import fcntl
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import quote

import pooch

MIRROR_ENV = "HARNESS_DATA_MIRROR"
TIMEOUT_S = 30


class FetchError(RuntimeError):
    """A file that could not be fetched; the message says which file, from where, and what to do."""


class ChecksumMismatch(FetchError):
    def __init__(self, path: Path, expected: str, got: str, source: str) -> None:
        self.path, self.expected, self.got = path, expected, got
        super().__init__(
            f"{path}: sha256 mismatch for the bytes from {source}: expected {expected}, got {got}; "
            "the download was removed and nothing was written at the destination"
        )


class _RangeIgnored(Exception):
    """The server answered a resumed request with the whole file (200) instead of the rest (206)."""


def sha256_of(path: Path) -> str:
    return pooch.file_hash(str(path), alg="sha256")


def mirrored(path: str, mirror: str) -> str:
    """The URL of ``path`` (relative to the data folder) on a mirror: a server that serves a data folder as
    fetched, so one machine with internet can fetch once and serve a cluster without."""
    return f"{mirror.rstrip('/')}/{quote(path)}"


@contextmanager
def locked(destination: Path) -> Iterator[None]:
    """An exclusive lock on ``DEST.lock`` for as long as ``DEST`` is being fetched."""
    destination.parent.mkdir(parents=True, exist_ok=True)
    lock = destination.with_name(destination.name + ".lock")
    with open(lock, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _transfer(url: str, part: Path, progress: bool) -> None:
    """Append the bytes of ``url`` that ``part`` lacks (all of them when it does not exist)."""
    offset = part.stat().st_size if part.exists() else 0
    # identity: a byte range of a gzip-encoded response counts encoded bytes, which a resume cannot append to
    headers = {"Accept-Encoding": "identity", **({"Range": f"bytes={offset}-"} if offset else {})}

    def refuse_whole_file(response, *args, **kwargs):
        if offset and response.status_code == 200:
            raise _RangeIgnored()

    downloader = pooch.HTTPDownloader(
        progressbar=progress, timeout=TIMEOUT_S, headers=headers, hooks={"response": refuse_whole_file}
    )
    if offset:
        print(f"resuming {part.name.removesuffix('.part')} at byte {offset:,} from {url}", file=sys.stderr)
    with open(part, "ab") as handle:
        downloader(url, handle, None)


def download(urls: list[str], destination: Path, sha256: str | None, size: int | None, progress: bool = True) -> str:
    """Fetch the first of ``urls`` that answers into ``destination``, verified; returns the file's sha256.

    ``sha256=None`` accepts what arrives (the caller records the hash). A partial file left by an interrupted
    transfer is resumed from whichever source answers: every source serves the same bytes."""
    import requests

    part = destination.with_name(destination.name + ".part")
    failures: list[str] = []
    for url in urls:
        try:
            if size is None or not part.exists() or part.stat().st_size < size:
                try:
                    _transfer(url, part, progress)
                except _RangeIgnored:
                    part.unlink()  # this source cannot resume: start again from its first byte
                    _transfer(url, part, progress)
        except requests.HTTPError as error:
            if error.response is not None and error.response.status_code == 416 and part.exists():
                pass  # nothing left to send: the partial file already holds every byte; the hash decides
            else:
                failures.append(f"{url}: {error}")
                continue
        except (requests.RequestException, OSError) as error:
            failures.append(f"{url}: {type(error).__name__}: {error}")
            continue
        got = sha256_of(part)
        if sha256 is not None and got != sha256:
            part.unlink()
            raise ChecksumMismatch(destination, sha256, got, url)
        os.replace(part, destination)
        return got
    tried = "\n  ".join(failures)
    raise FetchError(
        f"could not download {destination.name}; tried:\n  {tried}\n"
        f"Without internet, fetch from a mirror that serves a data folder holding the same files: --mirror URL "
        f"or {MIRROR_ENV}=URL (python -m harness.data urls NAME lists each file's path and source)"
    )
