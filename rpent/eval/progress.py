"""The sweep's progress line: done / running / failed, success so far, and an ETA from this session's pace."""

from __future__ import annotations

import sys
import time
from typing import TextIO


class Progress:
    def __init__(self, total: int, *, already_done: int = 0, already_solved: int = 0, concurrency: int = 1,
                 stream: TextIO | None = None, clock=time.monotonic) -> None:
        self.total = total
        self.done = already_done
        self.solved = already_solved
        self.failed = 0
        self.running = 0
        self.skipped = 0
        self.concurrency = concurrency
        self._done_here = 0
        self._clock = clock
        self._started = clock()
        self._stream = stream if stream is not None else sys.stderr

    def episode_started(self) -> None:
        self.running += 1

    def episode_finished(self, solved: bool) -> None:
        self.running -= 1
        self.done += 1
        self._done_here += 1
        self.solved += bool(solved)

    def episode_failed(self) -> None:
        """No complete record after the retries (the worker kept dying, or the run was refused)."""
        self.running -= 1
        self.failed += 1
        self._done_here += 1

    def episodes_skipped(self, n: int) -> None:
        self.skipped += n

    def eta_s(self) -> float | None:
        remaining = self.total - self.done - self.failed - self.skipped
        if self._done_here == 0:
            return None
        per_episode = (self._clock() - self._started) / self._done_here
        return remaining * per_episode

    def line(self) -> str:
        rate = f"{self.solved / self.done:.0%}" if self.done else "-"
        eta = self.eta_s()
        parts = [f"{self.done}/{self.total} done", f"{self.running} running", f"{self.failed} failed",
                 f"success so far {self.solved}/{self.done} ({rate})"]
        if self.skipped:
            parts.append(f"{self.skipped} skipped (token budget)")
        parts.append(f"ETA {_duration(eta)}" if eta is not None else "ETA -")
        return "[eval] " + ", ".join(parts)

    def show(self) -> None:
        print(self.line(), file=self._stream, flush=True)


def _duration(seconds: float) -> str:
    seconds = round(seconds)
    if seconds >= 3600:
        return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
    if seconds >= 60:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds}s"
