"""Fetching a registered dataset into the data folder: each file downloaded once, verified, extracted if need be.

What a fetch does for one file of the registry:

- already present and its hash is the one expected (published, or recorded at its first fetch): nothing;
- otherwise download what the sources deliver (the file, or the archive that holds it) with
  :func:`download`, from the mirror when one is given, else from each source in turn;
- no published checksum: record the hash in ``FILE.sha256`` beside it and say so (trust on first use); a later
  fetch checks against that record;
- an archive member: extracted once the archive is verified, and its own hash recorded beside it, so a later
  fetch can tell it is intact without the archive.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from harness.data.fetch.download import FetchError, download, locked, mirrored, sha256_of
from harness.data.fetch.extract import extract_member
from harness.data.fetch.registry import DataFile, Dataset

RECORD_SUFFIX = ".sha256"


@dataclass(frozen=True)
class Fetched:
    path: Path
    action: str  # "present", "downloaded", "extracted"
    sha256: str
    trusted_on_first_use: bool = False  # no published checksum: the hash was recorded by this fetch


def _record(path: Path) -> Path:
    return path.with_name(path.name + RECORD_SUFFIX)


def recorded_sha256(path: Path) -> str | None:
    record = _record(path)
    return record.read_text(encoding="utf-8").split()[0] if record.is_file() else None


def _write_record(path: Path, sha256: str, why: str) -> None:
    _record(path).write_text(f"{sha256}  {path.name}\n# {why}\n", encoding="utf-8")


def sources_of(file: DataFile, mirror: str | None) -> list[str]:
    """Where to download ``file`` from: the mirror's copy alone, or every source in order."""
    return [mirrored(file.download_path, mirror)] if mirror else list(file.sources)


def _expected(file: DataFile, downloaded: Path) -> str | None:
    return file.sha256 or recorded_sha256(downloaded)


def _ensure_download(file: DataFile, data_dir: Path, mirror: str | None, progress: bool) -> tuple[str, str, bool]:
    """The verified download of ``file`` (the file or its archive): (action, sha256, trusted on first use)."""
    target = data_dir / file.download_path
    with locked(target):
        expected = _expected(file, target)
        if target.is_file():
            got = sha256_of(target)
            if expected is None:
                _write_record(target, got, "recorded at first use: no published checksum")
                return "present", got, True
            if got == expected:
                return "present", got, False
            raise FetchError(
                f"{target} is already there but its sha256 is {got}, expected {expected}; move it away and fetch again"
            )
        got = download(sources_of(file, mirror), target, expected, file.size, progress)
        if expected is None:
            _write_record(target, got, "recorded at first use: no published checksum")
        return "downloaded", got, expected is None


def fetch_file(file: DataFile, data_dir: Path, mirror: str | None = None, progress: bool = True) -> Fetched:
    destination = data_dir / file.path
    if file.archive is None:
        action, sha256, tofu = _ensure_download(file, data_dir, mirror, progress)
        return Fetched(destination, action, sha256, tofu)
    recorded = recorded_sha256(destination)
    if destination.is_file() and recorded is not None and sha256_of(destination) == recorded:
        return Fetched(destination, "present", recorded)
    _, archive_sha, tofu = _ensure_download(file, data_dir, mirror, progress)
    assert file.member is not None
    with locked(destination):
        extract_member(data_dir / file.archive, file.member, destination)
        got = sha256_of(destination)
        _write_record(destination, got, f"extracted from {file.archive} (sha256 {archive_sha})")
    return Fetched(destination, "extracted", got, tofu)


def fetch_dataset(dataset: Dataset, data_dir: Path, mirror: str | None = None, progress: bool = True) -> list[Fetched]:
    fetched = []
    for file in dataset.files:
        result = fetch_file(file, data_dir, mirror, progress)
        if result.trusted_on_first_use:  # recorded just now
            print(
                f"{dataset.name}: no published checksum for {file.download_path}; recorded its sha256 "
                f"{result.sha256[:16]}… in {file.download_path}{RECORD_SUFFIX} (trust on first use: later fetches "
                "check against it)",
                file=sys.stderr,
            )
        fetched.append(result)
    return fetched


def presence(dataset: Dataset, data_dir: Path) -> str:
    """``yes``, ``partial`` (a download was cut: ``.part`` left), ``some`` or ``no``, without hashing."""
    here = [(data_dir / file.path).is_file() for file in dataset.files]
    if all(here):
        return "yes"
    if any((data_dir / (f.download_path + ".part")).exists() for f in dataset.files):
        return "partial"
    return "some" if any(here) else "no"
