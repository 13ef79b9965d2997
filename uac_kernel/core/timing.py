"""Where a batch's time goes (``Stopwatch``) and the cyclic GC paused while it is parsed, written
and folded (``no_gc``)."""

from __future__ import annotations

import gc
import time
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["Stopwatch", "no_gc"]


class Stopwatch:
    """Seconds per named step of one batch (``IngestReport.seconds``) or task (a fleet run's
    timings)."""

    def __init__(self) -> None:
        self.laps: dict[str, float] = {}
        self._last = time.perf_counter()

    def lap(self, name: str) -> None:
        now = time.perf_counter()
        self.laps[name] = self.laps.get(name, 0.0) + now - self._last
        self._last = now


@contextmanager
def no_gc() -> Iterator[None]:
    """Pause the cyclic GC while parsing, validating, writing and folding a batch.

    Each of these allocates containers per event that hold no cycles, and every so many
    allocations the GC would walk the long-lived records of the state again: a third of the CPU
    time of a million-event fold went there. One pause covers all four steps, so the batch's
    new objects are walked once when it ends. Rules run with the GC on: they are user code.
    """
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()
