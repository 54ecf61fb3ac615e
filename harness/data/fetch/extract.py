"""Taking one member out of a downloaded archive, refusing members that would land outside the data folder.

An archive from the internet may hold a member named ``/etc/x`` or ``../../x``, or a link that points out of
the folder it is extracted into. Such an archive is refused as a whole, naming the member, before anything is
written: tar archives through the standard library's ``data`` filter (PEP 706), zip archives by the same rules
checked on their names and on the targets of their symbolic links. The member is written to a partial file
and renamed into place.
"""

from __future__ import annotations

import os
import posixpath
import shutil
import stat
import tarfile
import zipfile
from pathlib import Path


class UnsafeArchive(ValueError):
    """An archive with a member that would be written outside the folder it is extracted into."""


class MissingMember(KeyError):
    """An archive without the member a registry entry names (another version of the archive, most likely)."""

    def __str__(self) -> str:  # the message as written, not KeyError's quoted repr of it
        return str(self.args[0])


def _outside(name: str) -> bool:
    """Whether a member name escapes its folder: absolute, a drive, or climbing above it with ``..``."""
    if name.startswith(("/", "\\")) or (len(name) > 1 and name[1] == ":"):
        return True
    depth = 0
    for part in name.replace("\\", "/").split("/"):
        depth += -1 if part == ".." else (0 if part in ("", ".") else 1)
        if depth < 0:
            return True
    return False


def _check_zip(archive: Path, handle: zipfile.ZipFile) -> None:
    for info in handle.infolist():
        if _outside(info.filename):
            raise UnsafeArchive(f"{archive}: member {info.filename!r} would be written outside the data folder")
        if stat.S_ISLNK(info.external_attr >> 16):
            target = handle.read(info).decode("utf-8", "replace")
            joined = posixpath.join(posixpath.dirname(info.filename), target)
            if target.startswith("/") or _outside(joined):
                raise UnsafeArchive(f"{archive}: link {info.filename!r} points outside the data folder ({target!r})")


def _check_tar(archive: Path, handle: tarfile.TarFile, folder: Path) -> None:
    for info in handle.getmembers():
        if _outside(info.name):  # the data filter would strip a leading "/" and extract it: refused instead
            raise UnsafeArchive(f"{archive}: member {info.name!r} would be written outside the data folder")
        try:
            tarfile.data_filter(info, str(folder))
        except tarfile.FilterError as error:
            raise UnsafeArchive(f"{archive}: member {info.name!r} refused: {error}") from error


def extract_member(archive: Path, member: str, destination: Path) -> None:
    """Write ``member`` of ``archive`` (tar, tar.gz/bz2/xz or zip) to ``destination``, atomically."""
    destination.parent.mkdir(parents=True, exist_ok=True)
    part = destination.with_name(destination.name + ".part")
    if zipfile.is_zipfile(archive):
        with zipfile.ZipFile(archive) as handle:
            _check_zip(archive, handle)
            if member not in handle.namelist():
                raise MissingMember(f"{archive}: no member {member!r}")
            with handle.open(member) as source, open(part, "wb") as target:
                shutil.copyfileobj(source, target)
    elif tarfile.is_tarfile(archive):
        with tarfile.open(archive) as handle:
            _check_tar(archive, handle, destination.parent)
            try:
                info = handle.getmember(member)
            except KeyError as error:
                raise MissingMember(f"{archive}: no member {member!r}") from error
            source = handle.extractfile(info)
            if source is None:
                raise MissingMember(f"{archive}: member {member!r} is not a regular file")
            with source, open(part, "wb") as target:
                shutil.copyfileobj(source, target)
    else:
        raise ValueError(f"{archive}: neither a zip nor a tar archive")
    os.replace(part, destination)
