"""What the benchmarks time with: the wall time of each of a series of calls."""

from __future__ import annotations

import time
from collections.abc import Callable


def timed_calls(fn: Callable[[], object], n: int) -> list[float]:
    """Seconds each of `n` calls of `fn` took, in order (no warm-up: the caller makes one if it needs it)."""
    times = []
    for _ in range(n):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return times
