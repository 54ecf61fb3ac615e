"""Where a run's time goes: seconds per stage, and the one line each stage prints."""

from __future__ import annotations

import logging
import time

log = logging.getLogger("harness.run.pipeline")


class StageClock:
    def __init__(self) -> None:
        self.timings: dict[str, float] = {}

    def add(self, stage: str, seconds: float) -> None:
        self.timings[stage] = self.timings.get(stage, 0.0) + seconds

    def since(self, stage: str, start: float) -> None:
        """Count the time since ``start`` (a ``time.perf_counter()``) to ``stage``."""
        self.add(stage, time.perf_counter() - start)

    def line(self, stage: str, detail: str, *timed: str) -> None:
        """The one line a stage prints: what it did and the seconds it took (its ``timings`` entries)."""
        seconds = sum(self.timings.get(name, 0.0) for name in timed or (stage,))
        log.info("%-8s %s (%.1f s)", stage, detail, seconds)
