"""Whether a cache folder lives on a network filesystem, and what the SQLite stores do about it.

The SQLite stores run in WAL mode, which SQLite documents as unsupported when the processes sharing a database
are on different hosts: WAL needs shared memory (the ``-shm`` index), and network filesystems do not share it.
SQLite's locking notes add that NFS locks are often broken. A cache folder on NFS, Lustre, GPFS, CIFS/SMB,
CephFS, BeeGFS, GlusterFS or a FUSE mount is therefore noticed when a store opens: by default the store falls
back to SQLite's rollback journal (slower, but with no shared-memory index) and logs a warning once;
``cache.network_fs=refuse`` makes it an error instead; ``allow`` keeps WAL (a single host writing a
network-mounted folder). Detection reads ``/proc/mounts``: the mount holding the folder is the longest
mount point that prefixes its resolved path.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

log = logging.getLogger(__name__)

NETWORK_FILESYSTEMS = frozenset(
    {"nfs", "nfs4", "lustre", "gpfs", "cifs", "smb3", "smbfs", "ceph", "beegfs", "glusterfs", "9p", "afs", "panfs"}
)
POLICIES = ("fallback", "refuse", "allow")

_policy = "fallback"
_warned: set[str] = set()


class NetworkFilesystemError(OSError):
    """A SQLite cache on a network filesystem with ``cache.network_fs=refuse``."""


def set_policy(policy: str) -> None:
    """``fallback`` (rollback journal and a warning), ``refuse`` (an error) or ``allow`` (WAL as on a local disk)."""
    global _policy
    if policy not in POLICIES:
        raise ValueError(f"cache.network_fs must be one of {POLICIES}, got {policy!r}")
    _policy = policy


def read_mounts() -> str:
    try:
        return Path("/proc/mounts").read_text()
    except OSError:
        return ""  # not Linux: nothing to detect with


def filesystem_type(path: str | Path, mounts: str | None = None) -> str | None:
    """The type of the filesystem holding ``path`` (``nfs4``, ``ext4``, ``fuse.sshfs``...), from ``mounts``
    in ``/proc/mounts`` format (read from the system when None); None when no mount matches."""
    target = os.path.realpath(path)
    best, best_type = "", None
    for line in (read_mounts() if mounts is None else mounts).splitlines():
        fields = line.split()
        if len(fields) < 3:
            continue
        # /proc/mounts escapes spaces and tabs in mount points as octal (\040, \011).
        point = fields[1].encode().decode("unicode_escape")
        inside = target == point or target.startswith(point.rstrip("/") + "/")
        if inside and len(point) >= len(best):
            best, best_type = point, fields[2]
    return best_type


def is_network(fstype: str | None) -> bool:
    if fstype is None:
        return False
    return fstype in NETWORK_FILESYSTEMS or fstype == "fuse" or fstype.startswith(("fuse.", "nfs"))


def journal_mode(folder: str | Path, mounts: str | None = None) -> str:
    """``WAL`` on a local disk; on a network filesystem what the policy says (``DELETE``, an error or ``WAL``)."""
    fstype = filesystem_type(folder, mounts)
    if not is_network(fstype) or _policy == "allow":
        return "WAL"
    where = f"cache folder {folder} is on a network filesystem ({fstype})"
    if _policy == "refuse":
        raise NetworkFilesystemError(
            f"{where}: SQLite's WAL mode does not work across hosts and its locks are unreliable there "
            "(cache.network_fs=refuse); put paths.cache_dir / HARNESS_CACHE_DIR on a local disk, or set "
            "cache.network_fs=fallback to use SQLite's rollback journal"
        )
    if str(folder) not in _warned:
        _warned.add(str(folder))
        log.warning(
            "%s: using SQLite's rollback journal instead of WAL (WAL needs shared memory that hosts do not "
            "share); concurrent writers from several hosts are still not safe on NFS locking, so give each "
            "host its own cache folder (cache.network_fs=refuse makes this an error)",
            where,
        )
    return "DELETE"
