"""Per-stage timings of one query, in milliseconds (the response's ``timings_ms``)."""

from __future__ import annotations

import time


class Stopwatch:
    def __init__(self) -> None:
        self.timings: dict[str, float] = {}
        self._start = self._last = time.perf_counter()

    def lap(self, stage: str) -> None:
        now = time.perf_counter()
        # a stage met twice (a second event search) adds up
        self.timings[stage] = round(self.timings.get(stage, 0.0) + (now - self._last) * 1000, 3)
        self._last = now

    def total(self) -> dict[str, float]:
        self.timings["total"] = round((time.perf_counter() - self._start) * 1000, 3)
        return self.timings
