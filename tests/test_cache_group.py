"""A cache folder shared by a group: every member can write what another member created.

The folder is setgid (files take its group) and every member runs at umask 002; the cache files a first user
creates are then group-writable, so a second user of the same group writes to them. Run as root (it starts
its writers under two other uids); skipped otherwise."""

from __future__ import annotations

import codecs
import os
import shutil
import stat
import tempfile
from pathlib import Path

import numpy as np
import pytest

from harness.cache import ArrayStore, TextStore, stores
from harness.cache.pools import PoolCache

GROUP, FIRST, SECOND = 46_100, 46_101, 46_102


def _write(folder: Path, key: str) -> str:
    store = TextStore(folder / "responses.sqlite", table="responses")
    store.put_texts({key: {"answer": key}})
    found = sorted(store.get_texts(["first", "second"]))
    store.close()
    PoolCache(folder).write_entry(key, b"entry bytes")
    return repr(found)


@pytest.fixture
def shared_folder():
    """A setgid folder owned by GROUP (mode 2775) that other uids can reach."""
    outer = Path(tempfile.mkdtemp(prefix="harness-group-"))
    outer.chmod(0o755)
    folder = outer / "cache"
    folder.mkdir()
    os.chown(folder, FIRST, GROUP)
    folder.chmod(0o2775)
    yield folder
    shutil.rmtree(outer)


def _hold_open(folder: Path, ready: int, release: int) -> str:
    """Write as ``_write`` does, then keep the store open (its -wal and -shm in use) until released."""
    store = TextStore(folder / "responses.sqlite", table="responses")
    store.put_texts({"first": {"answer": "first"}})
    os.write(ready, b"ready")
    os.read(release, 1)
    found = sorted(store.get_texts(["first", "second"]))
    store.close()
    return repr(found)


def start_as(uid: int, work, close: tuple[int, ...] = ()) -> tuple[int, int]:
    """Run ``work()`` in a forked process as ``uid`` (group GROUP, umask 002): its pid and the pipe its
    output comes back on. Forked rather than started afresh: the interpreter may lie where other uids cannot
    read it. The child closes ``close`` (the parent's ends of pipes it shares with the child)."""
    codecs.lookup("unicode_escape")  # loaded now: the child may not read the standard library's files
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        for fd in (read, *close):
            os.close(fd)
        status = 1
        try:
            os.setgroups([GROUP])
            os.setgid(GROUP)
            os.setuid(uid)
            os.umask(0o002)
            out = work()
            status = 0
        except BaseException as exc:  # noqa: BLE001 - reported to the parent
            out = f"{type(exc).__name__}: {exc}"
        os.write(write, out.encode())
        os._exit(status)
    os.close(write)
    return pid, read


def finish(pid: int, read: int) -> tuple[int, str]:
    with os.fdopen(read, "rb") as pipe:
        out = pipe.read().decode()
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status), out


def write_as(uid: int, folder: Path, key: str) -> tuple[int, str]:
    """``_write(folder, key)`` as ``uid``: its exit status and output."""
    return finish(*start_as(uid, lambda: _write(folder, key)))


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="needs root to start other uids")
def test_a_second_member_of_the_group_writes_to_a_cache_the_first_created(shared_folder):
    assert write_as(FIRST, shared_folder, "first") == (0, "['first']")
    database = shared_folder / "responses.sqlite"
    assert stat.S_IMODE(database.stat().st_mode) == 0o664 and database.stat().st_gid == GROUP
    # Before: "CacheAccessError: cache file .../responses.sqlite: attempt to write a readonly database".
    assert write_as(SECOND, shared_folder, "second") == (0, "['first', 'second']")
    assert sorted(p.name for p in (shared_folder / "pools").glob("*.npz")) == ["first.npz", "second.npz"]


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="needs root to start other uids")
def test_a_second_member_writes_while_the_first_holds_the_store_open(shared_folder):
    ready, ready_in = os.pipe()
    release_out, release = os.pipe()
    first = start_as(FIRST, lambda: _hold_open(shared_folder, ready_in, release_out), close=(ready, release))
    os.close(ready_in)
    os.close(release_out)
    try:
        assert os.read(ready, 5) == b"ready"
        for suffix in ("", "-wal", "-shm"):  # in use by the first member, written by the second
            assert stat.S_IMODE((shared_folder / f"responses.sqlite{suffix}").stat().st_mode) == 0o664
        assert write_as(SECOND, shared_folder, "second") == (0, "['first', 'second']")
    finally:
        os.close(release)
        os.close(ready)
    assert finish(*first) == (0, "['first', 'second']")


@pytest.mark.parametrize("umask", [0o022, 0o002, 0o077])
def test_sqlite_files_and_their_log_and_index_follow_the_umask(tmp_path, umask):
    stores.configure(None)
    old = os.umask(umask)
    try:
        texts = TextStore(tmp_path / "responses.sqlite", table="responses")
        texts.put_texts({"a": {"answer": "Paris"}})
        vectors = ArrayStore(tmp_path / "sub" / "embeddings.sqlite", table="embeddings")
        vectors.put_arrays({"v": np.ones(3)})
    finally:
        os.umask(old)
    try:
        for path in (tmp_path / "responses.sqlite", tmp_path / "sub" / "embeddings.sqlite"):
            for name in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
                assert stat.S_IMODE(name.stat().st_mode) == 0o666 & ~umask, name
    finally:
        texts.close()
        vectors.close()
    assert stat.S_IMODE(Path(PoolCache(tmp_path).write_entry("k", b"x")).stat().st_mode) == 0o666 & ~old
