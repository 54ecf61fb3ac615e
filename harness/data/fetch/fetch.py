"""Fetching a registered dataset into the data folder: each file downloaded once, verified, extracted if need be.

What a fetch does for one file of the registry:

- already present and its hash is the one expected (published, or recorded at its first fetch): nothing;
- otherwise download what the sources deliver (the file, or the archive that holds it) with
  :func:`download`, from the mirror when one is given, else from each source in turn;
- no published checksum: record the hash of what was downloaded (the archive itself, for a member) in
  ``FILE.sha256`` beside it and say so (trust on first use); a later fetch checks against that record;
- an archive member: extracted once the archive is verified, and its own hash recorded beside it, so a later
  fetch can tell it is intact without the archive.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from harness.data.fetch.download import REFUSED_HINT, TIMEOUT_S, FetchError, download, locked, mirrored, sha256_of
from harness.data.fetch.extract import MissingMember, extract_member
from harness.data.fetch.registry import DataFile, Dataset

RECORD_SUFFIX = ".sha256"


@dataclass(frozen=True)
class Fetched:
    path: Path
    action: str  # "present", "downloaded", "extracted"
    sha256: str
    trusted_on_first_use: bool = False  # no published checksum: the download's hash was recorded by this fetch


class IncompleteFetch(FetchError):
    """Some files of a dataset could not be fetched; the others were, and are listed in ``fetched``."""

    def __init__(self, name: str, fetched: list[Fetched], failed: list[tuple[DataFile, Exception]]) -> None:
        self.fetched, self.failed = fetched, failed
        missing = ", ".join(file.path for file, _ in failed)
        super().__init__(f"{name}: {len(failed)} of {len(fetched) + len(failed)} files not fetched: {missing}")


def _record(path: Path) -> Path:
    return path.with_name(path.name + RECORD_SUFFIX)


def recorded_sha256(path: Path) -> str | None:
    record = _record(path)
    return record.read_text(encoding="utf-8").split()[0] if record.is_file() else None


def _write_record(path: Path, sha256: str, why: str) -> None:
    _record(path).write_text(f"{sha256}  {path.name}\n# {why}\n", encoding="utf-8")


def _trust_on_first_use(file: DataFile, target: Path, sha256: str) -> None:
    """Record the hash of what was downloaded (the archive itself, for a member) and say so, at once: a member
    that then fails to extract must not hide that its archive was taken on trust."""
    _write_record(target, sha256, "recorded at first use: no published checksum")
    what = f"the archive {file.download_path}" if file.archive else file.download_path
    print(
        f"no published checksum for {what}; recorded its sha256 {sha256} in {file.download_path}{RECORD_SUFFIX} "
        "(trust on first use: later fetches check against it)",
        file=sys.stderr,
    )


def sources_of(file: DataFile, mirror: str | None) -> list[str]:
    """Where to download ``file`` from: the mirror's copy alone, or every source in order."""
    return [mirrored(file.download_path, mirror)] if mirror else list(file.sources)


def _expected(file: DataFile, downloaded: Path) -> str | None:
    return file.sha256 or recorded_sha256(downloaded)


def _ensure_download(
    file: DataFile, data_dir: Path, mirror: str | None, progress: bool, timeout: float
) -> tuple[str, str, bool]:
    """The verified download of ``file`` (the file or its archive): (action, its sha256, trusted on first use)."""
    target = data_dir / file.download_path
    with locked(target):
        expected = _expected(file, target)
        if target.is_file():
            got = sha256_of(target)
            if expected is None:
                _trust_on_first_use(file, target, got)
                return "present", got, True
            if got == expected:
                return "present", got, False
            raise FetchError(
                f"{target} is already there but its sha256 is {got}, expected {expected}; move it away and fetch "
                f"again.\n{REFUSED_HINT}"
            )
        got = download(sources_of(file, mirror), target, expected, file.size, progress, timeout)
        if expected is None:
            _trust_on_first_use(file, target, got)
        return "downloaded", got, expected is None


def fetch_file(
    file: DataFile, data_dir: Path, mirror: str | None = None, progress: bool = True, timeout: float = TIMEOUT_S
) -> Fetched:
    destination = data_dir / file.path
    if file.archive is None:
        action, sha256, tofu = _ensure_download(file, data_dir, mirror, progress, timeout)
        return Fetched(destination, action, sha256, tofu)
    recorded = recorded_sha256(destination)
    if destination.is_file() and recorded is not None and sha256_of(destination) == recorded:
        return Fetched(destination, "present", recorded)
    _, archive_sha, tofu = _ensure_download(file, data_dir, mirror, progress, timeout)
    assert file.member is not None
    with locked(destination):
        extract_member(data_dir / file.archive, file.member, destination)
        got = sha256_of(destination)
        _write_record(destination, got, f"extracted from {file.archive} (sha256 {archive_sha})")
    return Fetched(destination, "extracted", got, tofu)


def fetch_dataset(
    dataset: Dataset, data_dir: Path, mirror: str | None = None, progress: bool = True, timeout: float = TIMEOUT_S
) -> list[Fetched]:
    """Every file of ``dataset``; a file that fails does not stop the others (an archive may lack one member
    only), and :class:`IncompleteFetch` then lists both."""
    fetched: list[Fetched] = []
    failed: list[tuple[DataFile, Exception]] = []
    refused: dict[str, Exception] = {}  # a download or archive that failed fails its other members unretried
    for file in dataset.files:
        if file.download_path in refused:
            failed.append((file, refused[file.download_path]))
            continue
        try:
            fetched.append(fetch_file(file, data_dir, mirror, progress, timeout))
        except MissingMember as error:  # this member only: the archive's others may be there
            failed.append((file, error))
        except (FetchError, ValueError, KeyError, OSError) as error:  # the download or the whole archive
            refused[file.download_path] = error
            failed.append((file, error))
    if failed:
        raise IncompleteFetch(dataset.name, fetched, failed)
    return fetched


def presence(dataset: Dataset, data_dir: Path) -> str:
    """``yes``, ``partial`` (a download was cut: ``.part`` left), ``some`` or ``no``, without hashing."""
    here = [(data_dir / file.path).is_file() for file in dataset.files]
    if all(here):
        return "yes"
    if any((data_dir / (f.download_path + ".part")).exists() for f in dataset.files):
        return "partial"
    return "some" if any(here) else "no"
