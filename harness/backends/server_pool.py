"""Data parallel over several OpenAI-compatible servers of one model (one server per GPU, say), with failover.

Requests are dealt out in turn (request i to live server i mod N) rather than in contiguous runs, so a run of
long prompts does not land on one server. Each server has its own client (its own retries, backoff and rate
limit) and up to ``concurrency`` requests in flight. A server whose requests run out of retries with
:class:`harness.backends.http.ServerUnavailableError` (connection refused or reset, or 5xx) is marked down for
the rest of the pool's life, and its prompts, queued and in flight, go to the servers still up; only when
every server is down does the work fail. Any other error (a 4xx the request caused, a malformed answer) ends
the work as on a single server.

Results are handed to the caller's ``keep`` in the calling thread, as they arrive.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import Any, TypeVar

from harness.backends.http import OpenAICompatClient, ServerUnavailableError
from harness.core import signals

log = logging.getLogger(__name__)

J = TypeVar("J")
R = TypeVar("R")


def assign(requests: int, servers: int) -> list[int]:
    """The server of each request at the start: request i goes to server i mod ``servers``."""
    if servers < 1:
        raise ValueError(f"need at least one server, got {servers}")
    return [i % servers for i in range(requests)]


@dataclass(frozen=True)
class RequestFailed:
    """The first request that failed for a reason of its own (not a server going down)."""

    index: int
    error: BaseException


class ServerPool:
    """One :class:`OpenAICompatClient` per URL (``client`` holds their shared settings)."""

    def __init__(self, urls: Sequence[str], concurrency: int, name: str, **client: Any) -> None:
        if not urls:
            raise ValueError(f"{name}: needs at least one server URL")
        self.name = name
        self.concurrency = int(concurrency)
        self.clients = [
            OpenAICompatClient(base_url=url, **client, name=name, max_connections=self.concurrency) for url in urls
        ]
        self.base_urls = [c.base_url for c in self.clients]
        seen = [u for i, u in enumerate(self.base_urls) if u in self.base_urls[:i]]
        if seen:
            raise ValueError(f"{name}: server URL {seen[0]!r} is listed twice")
        self.down: dict[int, BaseException] = {}  # server index -> the error that took it down

    @property
    def http_requests(self) -> int:
        """Attempts sent to every server, retries included."""
        return sum(c.http_requests for c in self.clients)

    @property
    def retries(self) -> int:
        return sum(c.retries for c in self.clients)

    def live(self) -> list[int]:
        return [s for s in range(len(self.clients)) if s not in self.down]

    def close(self) -> None:
        for client in self.clients:
            client.close()

    def down_error(self, unanswered: int, received: int) -> ServerUnavailableError:
        reasons = "; ".join(f"{self.base_urls[s]}: {error}" for s, error in sorted(self.down.items()))
        return ServerUnavailableError(
            f"{self.name}: every server is down ({unanswered} prompts unanswered, {received} answers received "
            f"and cached): {reasons}"
        )

    def run(
        self,
        jobs: Sequence[J],
        send: Callable[[OpenAICompatClient, J], R],
        keep: Callable[[int, R], None],
        thread_prefix: str,
    ) -> RequestFailed | None:
        """``send(client, job)`` for every job, ``keep(index, result)`` in this thread as results arrive.
        Returns the first request that failed on its own (the jobs not yet started are then not sent, those
        in flight finish and are kept); raises :class:`ServerUnavailableError` when every server is down."""
        live = self.live()
        if not live:
            raise self.down_error(len(jobs), 0)
        queues: list[deque[int]] = [deque() for _ in self.clients]
        for index, slot in enumerate(assign(len(jobs), len(live))):
            queues[live[slot]].append(index)
        busy = [0] * len(self.clients)
        in_flight: dict[Future, tuple[int, int]] = {}
        failed: RequestFailed | None = None
        answered = 0
        pool = ThreadPoolExecutor(
            max_workers=max(1, min(self.concurrency * len(live), len(jobs))), thread_name_prefix=thread_prefix
        )

        def top_up(server: int) -> None:
            while failed is None and server not in self.down and queues[server] and busy[server] < self.concurrency:
                index = queues[server].popleft()
                busy[server] += 1
                in_flight[pool.submit(send, self.clients[server], jobs[index])] = (server, index)

        def move(indices: list[int]) -> None:
            # To the least loaded servers still up, so the moved prompts spread out instead of piling on one.
            for index in sorted(indices):
                target = min(self.live(), key=lambda s: (len(queues[s]) + busy[s], s))
                queues[target].append(index)

        stopped = False
        try:
            for server in live:
                top_up(server)
            while in_flight:
                done, _ = wait(in_flight, return_when=FIRST_COMPLETED)
                for future in done:
                    server, index = in_flight.pop(future)
                    busy[server] -= 1
                    error = future.exception()
                    if error is None:
                        top_up(server)  # before keeping, so the server is not left idle meanwhile
                        keep(index, future.result())
                        answered += 1
                    elif isinstance(error, ServerUnavailableError) and failed is None:
                        self._server_down(server, error, queues, busy)
                        moved = [index, *queues[server]]
                        queues[server].clear()
                        if self.live():
                            move(moved)
                            for other in self.live():
                                top_up(other)
                    elif isinstance(error, ServerUnavailableError):
                        self.down.setdefault(server, error)
                    elif failed is None:
                        failed = RequestFailed(index, error)
        except signals.Interrupted:
            # A stop does not wait for the answers in flight (a large model's can take minutes): the
            # requests not started are never sent, those running are left behind, and what arrived is kept.
            stopped = True
            pool.shutdown(wait=False, cancel_futures=True)
            signals.leave_behind([t for t in threading.enumerate() if t.name.startswith(thread_prefix)])
            raise
        finally:
            if not stopped:
                pool.shutdown(wait=True, cancel_futures=True)
        if failed is None and not self.live():
            raise self.down_error(len(jobs) - answered, answered)
        return failed

    def _server_down(self, server: int, error: BaseException, queues: list[deque[int]], busy: list[int]) -> None:
        if server in self.down:
            return  # a request in flight when it went down: moved quietly
        self.down[server] = error
        left = self.live()
        unanswered = len(queues[server]) + busy[server] + 1
        if not left:
            log.warning("%s: server %s is down (%s); no server is left", self.name, self.base_urls[server], error)
            return
        log.warning(
            "%s: server %s is down (%s); its %d unanswered prompts move to the servers still up: %s",
            self.name,
            self.base_urls[server],
            error,
            unanswered,
            ", ".join(self.base_urls[s] for s in left),
        )
