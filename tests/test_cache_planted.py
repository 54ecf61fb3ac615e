"""No planted file stalls a run or passes for its pools: a named pipe where a cache file belongs is refused
at once (never opened, so a read cannot block), and a pool entry whose recorded key was rewritten to this
run's is refused when its questions are not the ones the run loaded."""

from __future__ import annotations

import dataclasses
import io
import logging
import os
import threading
from pathlib import Path

import numpy as np
import pytest

from harness.cache import CacheAccessError, TextStore, stores
from harness.cache.__main__ import main
from harness.cache.pools import PoolCache, pool_key, pools_to_arrays
from tests.conftest import compose_cfg
from tests.test_cache_identity import demo_pools

LIMIT_S = 20


def within_limit(work):
    """``work()``'s result, or a failure (not a hang) when it blocks past LIMIT_S seconds."""
    result: dict = {}

    def target() -> None:
        try:
            result["value"] = work()
        except BaseException as exc:  # noqa: BLE001 - re-raised in the test's thread
            result["error"] = exc

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(LIMIT_S)
    if thread.is_alive():
        pytest.fail(f"blocked for {LIMIT_S} s on a named pipe")
    if "error" in result:
        raise result["error"]
    return result.get("value")


@pytest.fixture
def unblock():
    """Named pipes made by the test; each is opened for writing at the end, freeing a reader blocked on it."""
    made: list[Path] = []

    def fifo(path: Path) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        os.mkfifo(path)
        made.append(path)
        return path

    yield fifo
    for path in made:
        try:
            os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))
        except OSError:
            pass  # no reader blocked on it


def test_a_named_pipe_for_a_pool_entry_is_moved_aside_not_read(tmp_path, caplog, unblock):
    store = PoolCache(tmp_path)
    unblock(store.path("k"))
    with caplog.at_level(logging.WARNING):
        assert within_limit(lambda: store.load("k")) is None
    assert "not a regular file" in caplog.text and str(store.path("k")) in caplog.text
    assert not store.path("k").exists() and list(store.dir.glob("k.npz.corrupt-*"))
    _, pools, retrieval = demo_pools()
    store.save("k", pools, retrieval)
    assert store.load("k") is not None


@pytest.mark.parametrize("suffix", ["", "-wal", "-shm"])
def test_a_named_pipe_for_a_sqlite_file_is_an_error_naming_it(tmp_path, unblock, suffix):
    stores.configure(None)
    path = tmp_path / "responses.sqlite"
    if suffix:
        TextStore(path, table="responses").close()
    pipe = unblock(path.with_name(path.name + suffix))

    def open_and_write() -> None:
        TextStore(path, table="responses").put_texts({"a": "b"})

    with pytest.raises(CacheAccessError, match=f"{pipe}.*not a regular file"):
        within_limit(open_and_write)


def test_copy_leaves_a_named_pipe_behind(tmp_path, capsys, unblock):
    stores.configure(None)
    source = tmp_path / "cache"
    TextStore(source / "responses.sqlite", table="responses").put_texts({"a": "b"})
    pipe = unblock(source / "pools" / "k.npz")
    code = within_limit(lambda: main(["copy", "--quiet", str(source), str(tmp_path / "out")]))
    assert code != 0
    captured = capsys.readouterr()
    assert "pools:pools\t0 entries (1 damaged, left behind)" in captured.out
    assert str(pipe) in captured.err
    assert not (tmp_path / "out" / "pools" / "k.npz").exists()


def rekeyed(store: PoolCache, path: Path, key: str) -> None:
    """The entry at ``path`` rewritten to record ``key`` and stored under that key's name."""
    with np.load(path, allow_pickle=False) as npz:
        arrays = {name: npz[name] for name in npz.files}
    meta = arrays["meta"].tobytes().decode().replace(f'"key": "{path.stem}"', f'"key": "{key}"')
    assert f'"key": "{key}"' in meta
    arrays["meta"] = np.frombuffer(meta.encode(), dtype=np.uint8)
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    store.write_entry(key, buffer.getvalue())


def other_questions(examples):
    return [dataclasses.replace(ex, question=ex.question + " (edited)") for ex in examples]


def test_an_entry_rekeyed_to_other_questions_is_refused(tmp_path, caplog):
    examples, pools, retrieval = demo_pools()
    store = PoolCache(tmp_path)
    original = Path(store.save("theirs", pools, retrieval))
    rekeyed(store, original, "ours")
    with caplog.at_level(logging.WARNING):
        assert store.load("ours", other_questions(examples)) is None
    assert str(store.path("ours")) in caplog.text and "questions" in caplog.text
    assert not store.path("ours").exists()
    # The same questions are served, whatever their key.
    rekeyed(store, original, "again")
    assert store.load("again", examples) is not None


def test_a_run_refuses_an_entry_rekeyed_to_its_pool_key(tmp_path, caplog):
    cfg = compose_cfg(["dataset=demo"])
    examples, pools, retrieval = demo_pools()
    edited = other_questions(examples)
    key = pool_key(cfg, edited)  # the key the run computes for the questions it loaded
    store = PoolCache(tmp_path)
    arrays = pools_to_arrays(pools, retrieval, key)  # the other questions' pools, recording this key
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    store.write_entry(key, buffer.getvalue())
    with caplog.at_level(logging.WARNING):
        assert store.load(key) is None
    assert str(store.path(key)) in caplog.text and "questions" in caplog.text
    # An entry of the questions the run loaded is served.
    store.save(key, [dataclasses.replace(p, example=e) for p, e in zip(pools, edited, strict=True)], retrieval)
    assert store.load(key) is not None
