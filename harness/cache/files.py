"""Cache files as a group shares them, and only regular files opened.

A cache folder shared by a group (setgid, every member at umask 002) works only when every file in it is
created group-writable: ``create`` makes a missing file with mode ``0o666 & ~umask``, as the pool files and
run files are. A cache entry is opened only when it is a regular file: a named pipe (or a device) planted where
one belongs would block a read forever, so ``require_regular`` and ``read_regular`` refuse it before (and, for
a file swapped in meanwhile, just after) opening it.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path


class NotRegularFile(OSError):
    """A cache file that is a named pipe, socket or device: never read."""


def current_umask() -> int:
    """The process umask (read without changing it where Linux allows)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _kind(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a named pipe"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "not a file"


def require_regular(path: str | Path) -> bool:
    """True when ``path`` is a regular file, False when there is nothing there; IsADirectoryError for a
    folder and NotRegularFile for anything else (a named pipe...), without opening it."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return False
    if stat.S_ISDIR(mode):
        raise IsADirectoryError(21, "is a folder, not a file", str(path))
    if not stat.S_ISREG(mode):
        raise NotRegularFile(f"{path} is not a regular file ({_kind(mode)})")
    return True


def read_regular(path: str | Path) -> bytes:
    """The bytes of the regular file at ``path`` (FileNotFoundError when there is none; see
    ``require_regular`` for what else is refused)."""
    if not require_regular(path):
        raise FileNotFoundError(2, "No such file or directory", str(path))
    # Non-blocking open and a second check on what was opened: a pipe swapped in after the check never blocks.
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    with os.fdopen(fd, "rb") as handle:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise NotRegularFile(f"{path} is not a regular file ({_kind(mode)})")
        os.set_blocking(fd, True)
        return handle.read()


def create(path: str | Path) -> None:
    """Create ``path`` empty, with mode ``0o666 & ~umask``, unless something is there already."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o666)
    except FileExistsError:
        return
    os.close(fd)
