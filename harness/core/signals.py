"""SIGTERM and SIGINT stop a run within seconds, at any stage, with what it has finished kept.

``install()`` (called by the command line) makes both signals raise :class:`Interrupted` in the main thread,
the way SIGINT raises ``KeyboardInterrupt`` by default, so a run stops between two Python steps wherever it is:
encoding, packing, a summary tree or token-by-token generation. ``Interrupted`` derives from ``BaseException``
so that no ``except Exception`` on the way (a sweep's failed-job handler, Hydra's job runner) can swallow it,
and not from ``KeyboardInterrupt``, which Lightning turns into ``sys.exit(1)``.

Durable writes (a row-journal chunk, a batch of cached answers) run inside :func:`deferred`: a signal that
arrives there is held until the write is complete, so a stop never leaves half a chunk behind.

A backend that spends long stretches in native code, where no Python signal handler can run, polls
:func:`stop_requested` (or calls :func:`check`) between its own steps. A single native call that cannot be
cut short (a llama.cpp batch: tens of seconds on a CPU, minutes for a large model) runs through
:func:`abandonable`: on a helper thread, while the main thread waits in short steps, so a stop leaves it
behind at once. Its result is never used, and the command line then ends the process with ``os._exit``
(:func:`native_work_abandoned`), since interpreter shutdown would free the model under the running call.
"""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

log = logging.getLogger(__name__)

HANDLED = (signal.SIGTERM, signal.SIGINT)

_received: int | None = None  # the first stop signal, once one has arrived
_raised = False  # Interrupted was raised for it (later signals only log)
_deferring = 0  # depth of deferred() sections on the main thread
_abandoned: list[threading.Thread] = []  # native calls left running by a stop

T = TypeVar("T")
POLL_SECONDS = 0.1


class Interrupted(BaseException):
    """The run was asked to stop by a signal; the process should exit with ``exit_code``."""

    def __init__(self, signum: int) -> None:
        self.signum = int(signum)
        super().__init__(f"stopped by {signal.Signals(self.signum).name}")

    @property
    def exit_code(self) -> int:
        # The shell convention for a process ended by a signal: 143 for SIGTERM, 130 for SIGINT.
        return 128 + self.signum


def stop_requested() -> bool:
    """True once SIGTERM or SIGINT has arrived; backends poll it between steps."""
    return _received is not None


def raise_if_stopping(error: BaseException) -> None:
    """Raise :class:`Interrupted` (from ``error``) when ``error`` was raised while a stop signal unwinds the run:
    clean-up code on the way may fail because of the interruption itself, and the process must still exit as
    stopped (128 + the signal), with its finished work kept, not as failed."""
    if _received is not None and _raised:
        raise Interrupted(_received) from error


def check() -> None:
    """Raise :class:`Interrupted` if a stop signal has arrived (for loops that poll)."""
    global _raised
    if _received is not None and _deferring == 0:
        _raised = True
        raise Interrupted(_received)


def _handler(signum: int, frame) -> None:
    global _received
    if _received is None:
        _received = signum
        log.warning("received %s: stopping (finished rows and cached answers are kept)", signal.Signals(signum).name)
    elif _raised:
        # Already unwinding: a second signal must not interrupt the clean-up (W&B, journal) half-way.
        log.warning("received %s again: already stopping", signal.Signals(signum).name)
        return
    if _deferring == 0:
        check()


def install() -> None:
    """Route SIGTERM and SIGINT to :class:`Interrupted` (main thread only; elsewhere a no-op).

    Lightning's signal connector, set up inside ``Trainer.predict``, keeps a handler that is already in
    place and calls it after its own, and restores it on teardown, so this survives reading.
    """
    if threading.current_thread() is not threading.main_thread():
        return
    for signum in HANDLED:
        signal.signal(signum, _handler)


def reset() -> None:
    """Forget a received signal (tests and long-lived processes that handled it)."""
    global _received, _raised, _deferring
    _received, _raised, _deferring = None, False, 0


def abandonable(call: Callable[[], T], name: str = "native-call") -> T:
    """``call()``, run so that a stop signal ends the wait for it within ``POLL_SECONDS``.

    On the main thread the call runs on a daemon thread and the main thread waits in short steps; when a
    stop arrives, :class:`Interrupted` is raised there and the call is left running, its result dropped.
    Off the main thread (where no signal lands) it is simply called.
    """
    if threading.current_thread() is not threading.main_thread():
        return call()
    outcome: dict[str, object] = {}
    done = threading.Event()

    def target() -> None:
        try:
            outcome["value"] = call()
        except BaseException as error:  # handed to the waiting thread
            outcome["error"] = error
        finally:
            done.set()

    worker = threading.Thread(target=target, name=name, daemon=True)
    worker.start()
    try:
        while not done.wait(POLL_SECONDS):
            check()
    except Interrupted:
        if not done.is_set():
            _abandoned.append(worker)
        raise
    if "error" in outcome:
        raise outcome["error"]  # type: ignore[misc]
    return outcome["value"]  # type: ignore[return-value]


def leave_behind(workers: list[threading.Thread]) -> None:
    """Threads a stop leaves running (requests in flight to a server): the process will not wait for them."""
    _abandoned.extend(workers)


def native_work_abandoned() -> bool:
    """True when a stop left work running on another thread (see :func:`abandonable`, :func:`leave_behind`)."""
    return any(worker.is_alive() for worker in _abandoned)


@contextmanager
def deferred() -> Iterator[None]:
    """Hold a stop signal until the block ends, then raise it: for writes that must not be torn."""
    global _deferring
    on_main = threading.current_thread() is threading.main_thread()
    if on_main:
        _deferring += 1
    try:
        yield
    finally:
        if on_main:
            _deferring -= 1
    if on_main and _deferring == 0 and _received is not None and not _raised:
        check()
