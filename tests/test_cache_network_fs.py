"""A SQLite cache on a network filesystem is noticed: rollback journal and a warning, or an error when refused.

Detection is faked (a /proc/mounts text naming the test's folder as an NFS mount); the SQLite files are real."""

from __future__ import annotations

import logging
import sqlite3

import pytest

from harness.cache import TextStore
from harness.cache import network_fs as cache_fs
from harness.run.config_check import problems
from tests.conftest import compose_cfg

MOUNTS = """\
/dev/root / ext4 rw,relatime 0 0
proc /proc proc rw,nosuid 0 0
server:/export /mnt/shared nfs4 rw,relatime,vers=4.2 0 0
sshfs#me@host:/data /mnt/fuse\\040dir fuse.sshfs rw 0 0
lustre@tcp:/scratch /lus lustre rw 0 0
"""


@pytest.fixture(autouse=True)
def default_policy():
    cache_fs.set_policy("fallback")
    cache_fs._warned.clear()
    yield
    cache_fs.set_policy("fallback")


def test_the_longest_mount_point_holding_the_path_decides():
    assert cache_fs.filesystem_type("/mnt/shared/cache/x.sqlite", MOUNTS) == "nfs4"
    assert cache_fs.filesystem_type("/mnt/sharedother", MOUNTS) == "ext4"  # a prefix of the name is not a parent
    assert cache_fs.filesystem_type("/mnt/fuse dir/c", MOUNTS) == "fuse.sshfs"  # escaped space in the mount point
    assert cache_fs.filesystem_type("/lus/project", MOUNTS) == "lustre"
    assert [cache_fs.is_network(t) for t in ("nfs4", "lustre", "fuse.sshfs", "cifs", "ext4", "xfs", None)] == [
        True,
        True,
        True,
        True,
        False,
        False,
        False,
    ]


def _fake_network(monkeypatch, folder):
    monkeypatch.setattr(cache_fs, "read_mounts", lambda: f"/dev/root / ext4 rw 0 0\nsrv:/x {folder} nfs4 rw 0 0\n")


def _journal(path) -> str:
    with sqlite3.connect(path) as conn:
        return conn.execute("PRAGMA journal_mode").fetchone()[0].lower()


def test_local_disk_keeps_wal(tmp_path):
    store = TextStore(tmp_path / "responses.sqlite")
    store.put_texts({"k": {"raw": "x"}})
    assert _journal(tmp_path / "responses.sqlite") == "wal"


def test_network_filesystem_falls_back_to_the_rollback_journal_with_one_warning(tmp_path, monkeypatch, caplog):
    _fake_network(monkeypatch, tmp_path)
    with caplog.at_level(logging.WARNING, logger="harness.cache.network_fs"):
        store = TextStore(tmp_path / "responses.sqlite")
        store.put_texts({"k": {"raw": "x"}})
        TextStore(tmp_path / "other.sqlite")
    assert store.get_texts(["k"]) == {"k": {"raw": "x"}}
    assert _journal(tmp_path / "responses.sqlite") == "delete"
    assert not (tmp_path / "responses.sqlite-wal").exists()
    warnings = [r.getMessage() for r in caplog.records if "network filesystem" in r.getMessage()]
    assert len(warnings) == 1 and "nfs4" in warnings[0] and "cache.network_fs=refuse" in warnings[0]


def test_refuse_is_an_error_naming_the_folder(tmp_path, monkeypatch):
    _fake_network(monkeypatch, tmp_path)
    cache_fs.set_policy("refuse")
    with pytest.raises(cache_fs.NetworkFilesystemError, match=str(tmp_path)):
        TextStore(tmp_path / "responses.sqlite")


def test_allow_keeps_wal(tmp_path, monkeypatch):
    _fake_network(monkeypatch, tmp_path)
    cache_fs.set_policy("allow")
    TextStore(tmp_path / "responses.sqlite").put_texts({"k": 1})
    assert _journal(tmp_path / "responses.sqlite") == "wal"


def test_the_setting_is_checked_with_the_config():
    assert problems(compose_cfg(["cache.network_fs=refuse"])) == []
    (line,) = problems(compose_cfg(["cache.network_fs=maybe"]))
    assert line.startswith("cache.network_fs='maybe' is out of range")
