"""One contract for both cache backends, run against a real SQLite file and a real PostgreSQL server:
round trips, several writer processes at once, a writer killed with SIGKILL mid-write, a damaged value
recomputed, the same keys and values in both (so a cache can be copied between them), and an unreachable
server reported by its URL."""

from __future__ import annotations

import logging
import multiprocessing
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from harness.cache import ArrayStore, CacheAccessError, TextStore, stores
from harness.cache.stores import unseal
from tests.conftest import REPO


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.process)])
def backend(request, tmp_path):
    """Configure the stores for one backend; yields a function opening a store by file name and table."""
    url = request.getfixturevalue("postgres_url") if request.param == "postgresql" else None
    stores.configure(url, tmp_path)
    yield lambda kind, name: kind(tmp_path / f"{name}.sqlite", table=name)
    stores.configure(None)


def entries(worker: int, n: int = 120) -> dict[str, dict]:
    """What worker ``worker`` writes: keys shared with the other workers, values fixed by the key."""
    return {f"k{(worker * 40 + i) % 200:03d}": {"answer": f"value of {(worker * 40 + i) % 200}"} for i in range(n)}


@pytest.mark.process
def test_round_trip_of_texts_and_vectors(backend):
    texts = backend(TextStore, "responses")
    texts.put_texts({"a": {"answer": "Paris", "tokens": [1, 2]}, "b": "plain"})
    assert texts.get_texts(["a", "b", "missing"]) == {"a": {"answer": "Paris", "tokens": [1, 2]}, "b": "plain"}
    vectors = backend(ArrayStore, "embeddings")
    vectors.put_arrays({"v": np.arange(5, dtype=np.float32)})
    assert np.array_equal(vectors.get_arrays(["v"])["v"], np.arange(5, dtype=np.float32))
    assert len(texts) == 2 and len(vectors) == 1


def _write(url, folder, worker) -> None:
    stores.configure(url, folder)
    store = TextStore(os.path.join(folder, "shared.sqlite"), table="shared")
    items = list(entries(worker).items())
    for start in range(0, len(items), 10):
        store.put_texts(dict(items[start : start + 10]))
    store.close()


@pytest.mark.process
def test_several_writer_processes_at_once(backend, tmp_path, caplog):
    url = stores.configured_url()
    context = multiprocessing.get_context("spawn")
    workers = [context.Process(target=_write, args=(url, str(tmp_path), w)) for w in range(4)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(120)
        assert w.exitcode == 0
    expected = {k: v for w in range(4) for k, v in entries(w).items()}
    store = backend(TextStore, "shared")
    with caplog.at_level(logging.WARNING):
        assert store.get_texts(expected) == expected
    assert len(store) == len(expected) and "checksum" not in caplog.text


KILLED_WRITER = """
import sys
from harness.cache import TextStore, stores
stores.configure(sys.argv[1] or None, sys.argv[2])
store = TextStore(sys.argv[2] + "/killed.sqlite", table="killed")
for batch in range(10**6):
    store.put_texts({f"b{batch:06d}-{i:03d}": {"answer": "x" * 500, "i": i} for i in range(200)})
    print(batch, flush=True)
"""


@pytest.mark.process
def test_a_writer_killed_mid_write_leaves_only_whole_entries(backend, tmp_path, caplog):
    url = stores.configured_url() or ""
    proc = subprocess.Popen(
        [sys.executable, "-c", KILLED_WRITER, url, str(tmp_path)], cwd=REPO, stdout=subprocess.PIPE, text=True
    )
    for _ in range(3):  # three batches committed, the fourth (or a later one) in flight
        assert proc.stdout.readline(), "the writer died before the signal"
    time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait(30)
    store = backend(TextStore, "killed")
    raw = [item for batch in store.backend.batches() for item in batch]
    assert len(raw) >= 600 and len(raw) % 200 == 0  # whole batches only: each write is one transaction
    assert all(unseal(key, value) is not None for key, value in raw)
    with caplog.at_level(logging.WARNING):
        assert len(store.get_texts(key for key, _ in raw)) == len(raw)
    assert "checksum" not in caplog.text
    store.put_texts({"after": {"answer": "y"}})
    assert store.get_texts(["after"]) == {"after": {"answer": "y"}}


def test_a_damaged_value_is_not_served_and_is_recomputed(backend, caplog):
    store = backend(TextStore, "damaged")
    store.put_texts({"good": {"answer": "Paris"}, "bad": {"answer": "Paris"}})
    sealed = store.get_many(["bad"])["bad"]
    flipped = bytearray(sealed)
    flipped[13] ^= 0x01  # '"Paris"' -> '"Qaris"': still valid JSON, only wrong
    store.backend.discard({"bad": sealed})
    store.put_many({"bad": bytes(flipped)})
    with caplog.at_level(logging.WARNING):
        assert store.get_texts(["good", "bad"]) == {"good": {"answer": "Paris"}}
    assert store.backend.location in caplog.text and "bad" in caplog.text
    store.put_texts({"bad": {"answer": "Paris"}})  # what the caller recomputes takes the damaged one's place
    assert store.get_texts(["bad"]) == {"bad": {"answer": "Paris"}}


def test_both_backends_hold_the_same_keys_and_values(tmp_path, postgres_url):
    held = {}
    for url in (None, postgres_url):
        stores.configure(url, tmp_path)
        store = TextStore(tmp_path / "same.sqlite", table="same")
        store.put_texts(entries(0))
        held[url] = [item for batch in store.backend.batches(7) for item in batch]
    stores.configure(None)
    assert held[None] == held[postgres_url] and len(held[None]) == len(entries(0))


def test_an_unreachable_server_is_an_error_naming_its_url(tmp_path):
    url = f"postgresql://harness:secret@/cache?host={tmp_path / 'no-server'}"
    stores.configure(url, tmp_path)
    try:
        with pytest.raises(CacheAccessError, match=r"cache database postgresql://harness:\*\*\*@/cache"):
            TextStore(tmp_path / "responses.sqlite", table="responses")
    finally:
        stores.configure(None)
    assert not (tmp_path / "responses.sqlite").exists()  # no silent fall-back to a local file


def test_entries_of_an_older_version_are_not_served_until_resealed(tmp_path, caplog):
    import hashlib
    import json

    from harness.cache.copy import reseal

    stores.configure(None)
    store = TextStore(tmp_path / "responses.sqlite", table="responses")
    payload = json.dumps({"answer": "Paris"}).encode()
    store.put_many({"old": payload + hashlib.blake2b(payload, digest_size=16).digest()})  # the older seal
    with caplog.at_level(logging.WARNING):
        assert store.get_texts(["old"]) == {}
    assert "sealed by an older version" in caplog.text and "reseal" in caplog.text
    assert len(store) == 1  # left in place for reseal, not deleted as damage
    assert reseal(str(tmp_path)) == {"responses.sqlite:responses": 1}
    assert store.get_texts(["old"]) == {"old": {"answer": "Paris"}}
    assert reseal(str(tmp_path)) == {"responses.sqlite:responses": 0}  # nothing left to reseal


def test_a_folder_copy_keeps_every_store_and_leaves_temporaries_behind(tmp_path):
    from harness.cache.copy import copy_cache
    from harness.cache.copy import stores as stores_at

    stores.configure(None)
    source = tmp_path / "cache #1 (old)"  # characters a file: URI must escape
    TextStore(source / "responses.sqlite", table="responses").put_texts(entries(0))
    ArrayStore(source / "tree_lm" / "raptor" / "embeddings.sqlite", table="embeddings").put_arrays({"v": np.ones(3)})
    from harness.cache.pools import PoolCache
    from tests.test_cache_identity import demo_pools

    _, pools, retrieval = demo_pools()
    entry = Path(PoolCache(source).save("abc", pools, retrieval)).read_bytes()  # copied only if a run could load it
    (source / "pools" / ".abc.x1y2.tmp.npz").write_bytes(b"half-written")
    done = copy_cache(str(source), str(tmp_path / "copy"), progress=False)
    assert {c.store: c.entries for c in done} == {
        "pools:pools": 1,
        "responses.sqlite:responses": len(entries(0)),
        "tree_lm/raptor/embeddings.sqlite:embeddings": 1,
    }
    assert stores_at(str(tmp_path / "copy")) == stores_at(str(source))
    assert sorted(p.name for p in (tmp_path / "copy" / "pools").iterdir()) == ["abc.npz"]
    assert (tmp_path / "copy" / "pools" / "abc.npz").read_bytes() == entry
    copied = TextStore(tmp_path / "copy" / "responses.sqlite", table="responses")
    assert copied.get_texts(entries(0)) == entries(0)
