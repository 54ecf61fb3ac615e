"""A PostgreSQL server that accepts the connection and never answers stops the run within
``cache.connect_timeout_s``, retries included, with an error naming that key."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

import pytest

from harness.cache import CacheAccessError, TextStore, stores
from harness.cache.postgres import CONNECT_TIMEOUT_S
from harness.run.config_check import problems
from tests.conftest import compose_cfg


@pytest.fixture
def silent_server() -> Iterator[int]:
    """A TCP server on loopback that accepts every connection and never sends a byte."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    accepted: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.1)
        while not stop.is_set():
            try:
                accepted.append(listener.accept()[0])
            except TimeoutError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield listener.getsockname()[1]
    finally:
        stop.set()
        thread.join()
        for conn in accepted:
            conn.close()
        listener.close()


def test_a_server_that_never_answers_fails_within_the_timeout(tmp_path, silent_server):
    url = f"postgresql://harness:secret@127.0.0.1:{silent_server}/cache"
    stores.configure(url, tmp_path, connect_timeout_s=2)
    start = time.monotonic()
    try:
        with pytest.raises(CacheAccessError) as caught:
            TextStore(tmp_path / "responses.sqlite", table="responses")
    finally:
        stores.configure(None)
    seconds = time.monotonic() - start
    assert seconds < 4, f"held for {seconds:.1f} s"
    message = str(caught.value)
    assert "cache.connect_timeout_s=2 s" in message and "secret" not in message


def test_the_default_bounds_a_hung_server_to_a_few_seconds():
    assert 2 <= CONNECT_TIMEOUT_S <= 10


def test_the_timeout_is_a_config_value_checked_early():
    assert problems(compose_cfg(["cache.connect_timeout_s=3"])) == []
    (line,) = problems(compose_cfg(["cache.connect_timeout_s=0"]))
    assert line.startswith("cache.connect_timeout_s=0 is out of range")
