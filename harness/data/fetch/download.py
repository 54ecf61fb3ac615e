"""One verified download: pooch's HTTP downloader into a partial file that resumes, then sha256, then rename.

A file becomes visible at its destination only once its hash is checked: bytes go to ``DEST.part`` (appended
to with an HTTP Range request when an earlier transfer was cut), the whole is hashed, and only then renamed
into place. A hash that differs removes the partial file and names the file, the hash expected and the hash
got. A destination folder is locked while a file is fetched, so two jobs that fetch the same file at once
take turns instead of writing into one partial file.

A source that fails says how: an HTTP error, a transfer cut before its Content-Length, a server that stopped
sending for ``timeout`` seconds, or no connection at all; only the last calls for a mirror.
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
TIMEOUT_S = 30.0  # seconds without a byte from a server before its source counts as failed
USER_REGISTRY_DOC = "docs/data.md#datasets-of-your-own"
# What a refused file means: the bytes are not the ones the registry's figures were computed on.
REFUSED_HINT = (
    "The server (or mirror) may hold another version of the file than the one the registry names: fetch from "
    "another source or mirror, or ask its keeper to replace it. For a file of your own, write your own registry "
    f"entry with its hash (--registry FILE, {USER_REGISTRY_DOC}); a figure computed on it is not the dataset's "
    "figure."
)


class FetchError(RuntimeError):
    """A file that could not be fetched; the message says which file, from where, and what to do."""


class ChecksumMismatch(FetchError):
    def __init__(self, path: Path, expected: str, got: str, source: str) -> None:
        self.path, self.expected, self.got = path, expected, got
        super().__init__(
            f"{path}: sha256 mismatch for the bytes from {source}: expected {expected}, got {got}; "
            f"the download was removed and nothing was written at the destination.\n{REFUSED_HINT}"
        )


class _RangeIgnored(Exception):
    """The server answered a resumed request with the whole file (200) instead of the rest (206)."""


class _SourceFailed(Exception):
    """One source that delivered nothing usable: what happened, and whether the network itself failed."""

    def __init__(self, message: str, network: bool = False) -> None:
        super().__init__(message)
        self.network = network


def sha256_of(path: Path) -> str:
    return pooch.file_hash(str(path), alg="sha256")


def mirrored(path: str, mirror: str) -> str:
    """The URL of ``path`` (relative to the data folder) on a mirror: a server that serves a data folder as
    fetched, so one machine with internet can fetch once and serve a cluster without."""
    return f"{mirror.rstrip('/')}/{quote(path)}"


@contextmanager
def locked(destination: Path) -> Iterator[None]:
    """An exclusive lock on ``DEST.lock`` for as long as ``DEST`` is being fetched; the lock file is removed
    after, so a data folder holds data only."""
    destination.parent.mkdir(parents=True, exist_ok=True)
    lock = destination.with_name(destination.name + ".lock")
    while True:
        handle = open(lock, "a")  # held past this loop: closed once the fetch is done
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            current = os.stat(lock).st_ino
        except FileNotFoundError:
            current = None
        # The holder before us removed the file we waited on: lock the one at the path now, or two jobs that
        # locked different files would both go ahead.
        if current == os.fstat(handle.fileno()).st_ino:
            break
        handle.close()
    try:
        yield
    finally:
        lock.unlink(missing_ok=True)  # while still held: a job waiting on this file sees it gone and retries
        handle.close()


def _failure(error: Exception, url: str, part: Path, total: int | None, timeout: float) -> _SourceFailed:
    """``error`` of a transfer from ``url`` in words. requests reports a stall in the middle of a body as a
    ConnectionError, and a connection refused or a host unknown as one too: only the latter is the network."""
    import requests
    from urllib3.exceptions import ReadTimeoutError

    cause = error.args[0] if error.args else None
    if isinstance(error, requests.HTTPError) and error.response is not None:
        return _SourceFailed(f"HTTP {error.response.status_code} {error.response.reason} from {url}")
    if isinstance(error, requests.ReadTimeout) or isinstance(cause, ReadTimeoutError):
        return _SourceFailed(f"no data for {timeout:g} s from {url}{_kept(part)}")
    if isinstance(error, requests.exceptions.ChunkedEncodingError):  # closed before Content-Length bytes
        received = part.stat().st_size if part.exists() else 0
        of = f" of {total:,}" if total else ""
        return _SourceFailed(f"transfer cut after {received:,}{of} bytes from {url}{_kept(part)}")
    if isinstance(error, requests.ConnectionError):  # refused, unknown host, no route, connect timeout
        reason = getattr(cause, "reason", None) or error  # urllib3's own words, not the retry wrapper's
        return _SourceFailed(f"no connection to {url}: {reason}", network=True)
    return _SourceFailed(f"{url}: {type(error).__name__}: {error}")


def _kept(part: Path) -> str:
    return "; the next fetch resumes from there" if part.exists() and part.stat().st_size else ""


def _transfer(url: str, part: Path, progress: bool, timeout: float) -> None:
    """Append the bytes of ``url`` that ``part`` lacks (all of them when it does not exist)."""
    import requests

    offset = part.stat().st_size if part.exists() else 0
    # identity: a byte range of a gzip-encoded response counts encoded bytes, which a resume cannot append to
    headers = {"Accept-Encoding": "identity", **({"Range": f"bytes={offset}-"} if offset else {})}
    total: list[int] = []  # the whole file's size, from the answer's Content-Length, for a cut transfer's error

    def on_response(response, *args, **kwargs):
        if offset and response.status_code == 200:
            raise _RangeIgnored()
        length = response.headers.get("Content-Length", "")
        if response.ok and length.isdigit():
            total.append(offset + int(length))

    downloader = pooch.HTTPDownloader(
        progressbar=progress, timeout=timeout, headers=headers, hooks={"response": on_response}
    )
    if offset:
        print(f"resuming {part.name.removesuffix('.part')} at byte {offset:,} from {url}", file=sys.stderr)
    try:
        with open(part, "ab") as handle:
            downloader(url, handle, None)
    except requests.HTTPError as error:
        if offset and error.response is not None and error.response.status_code == 416:
            return  # nothing left to send: the partial file already holds every byte; the hash decides
        raise _failure(error, url, part, None, timeout) from error
    except requests.RequestException as error:
        raise _failure(error, url, part, total[0] if total else None, timeout) from error
    finally:
        if part.exists() and not part.stat().st_size:
            part.unlink()  # nothing arrived: no empty partial file to resume from


def download(
    urls: list[str],
    destination: Path,
    sha256: str | None,
    size: int | None,
    progress: bool = True,
    timeout: float = TIMEOUT_S,
) -> str:
    """Fetch the first of ``urls`` that answers into ``destination``, verified; returns the file's sha256.

    ``sha256=None`` accepts what arrives (the caller records the hash). A partial file left by an interrupted
    transfer is resumed from whichever source answers: every source serves the same bytes. ``timeout``: seconds
    a server may send nothing before its source counts as failed."""
    part = destination.with_name(destination.name + ".part")
    failures: list[_SourceFailed] = []
    for url in urls:
        try:
            if size is None or not part.exists() or part.stat().st_size < size:
                try:
                    _transfer(url, part, progress, timeout)
                except _RangeIgnored:
                    part.unlink()  # this source cannot resume: start again from its first byte
                    _transfer(url, part, progress, timeout)
        except _SourceFailed as failure:
            failures.append(failure)
            continue
        except OSError as error:  # the data folder's side: a full disk, a folder not writable
            failures.append(_SourceFailed(f"{url}: {type(error).__name__}: {error}"))
            continue
        got = sha256_of(part)
        if sha256 is not None and got != sha256:
            part.unlink()
            raise ChecksumMismatch(destination, sha256, got, url)
        os.replace(part, destination)
        return got
    tried = "\n  ".join(str(failure) for failure in failures)
    offline = (
        f"\nWithout internet, fetch from a mirror that serves a data folder holding the same files: --mirror URL "
        f"or {MIRROR_ENV}=URL (python -m harness.data urls NAME lists each file's path and source)"
    )
    # The mirror advice only when a connection failed: a 404 or a cut transfer has another cause and cure.
    network = any(failure.network for failure in failures)
    raise FetchError(f"could not download {destination.name}; tried:\n  {tried}{offline if network else ''}")
