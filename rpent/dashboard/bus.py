"""The dashboard's event bus: a bounded ring of numbered events that clients read at their own pace.

Publishers (robot, planner and sampler threads) append under a short lock and poke waiting
readers; they never wait for a reader. Each reader keeps only a cursor (the last event id it
sent). A reader that falls further behind than the ring holds is told to `resync` (refetch the
state snapshot) instead of holding the publisher back or buffering without bound.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections import deque
from dataclasses import dataclass
from typing import Any

from rpent.record.values import json_default


@dataclass(frozen=True)
class Event:
    """One published event; `data` is its JSON text, encoded once when it was published."""

    id: int
    kind: str
    data: str
    time: float


@dataclass(frozen=True)
class ReadResult:
    events: list[Event]
    #: True when events after the reader's cursor were already dropped from the ring.
    gap: bool
    #: The cursor to continue from.
    cursor: int


class Waiter:
    """Wakes one asyncio reader when anything is published (events, or a new frame)."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.event = asyncio.Event()
        # Set by the first poke after a wait; later pokes skip the cross-thread call (a reader that
        # is busy writing, or stalled on a full socket, costs publishers nothing more).
        self._poked = False

    def poke(self) -> None:
        if self._poked:
            return
        self._poked = True
        try:
            self.loop.call_soon_threadsafe(self.event.set)
        except RuntimeError:  # the reader's loop has closed; it is about to unsubscribe
            pass

    async def wait(self, timeout_s: float) -> None:
        """Wait for a poke. The caller reads the bus after this returns, so a poke skipped
        between the wake-up and the read loses nothing."""
        try:
            await asyncio.wait_for(self.event.wait(), timeout_s)
        except asyncio.TimeoutError:
            pass
        self._poked = False
        self.event.clear()


class EventBus:
    """Thread-safe, bounded, never blocking on readers. Event ids start at 1 and only increase."""

    def __init__(self, capacity: int = 4096) -> None:
        if capacity < 1:
            raise ValueError(f"capacity: must be >= 1, got {capacity}")
        self.capacity = capacity
        self._ring: deque[Event] = deque(maxlen=capacity)
        self._lock = threading.Lock()
        self._last_id = 0
        self._waiters: set[Waiter] = set()

    @property
    def last_id(self) -> int:
        return self._last_id

    def publish(self, kind: str, payload: dict[str, Any]) -> int:
        data = json.dumps(payload, default=json_default, ensure_ascii=False)
        return self.append_encoded(kind, data)

    def append_encoded(self, kind: str, data: str) -> int:
        with self._lock:
            self._last_id += 1
            self._ring.append(Event(self._last_id, kind, data, time.time()))
            event_id = self._last_id
            waiters = list(self._waiters)
        for waiter in waiters:
            waiter.poke()
        return event_id

    def poke(self) -> None:
        """Wake readers without an event (e.g. a frame channel has a new picture)."""
        with self._lock:
            waiters = list(self._waiters)
        for waiter in waiters:
            waiter.poke()

    def read(self, cursor: int, limit: int = 500) -> ReadResult:
        """Events with id > cursor (at most `limit`), oldest first."""
        with self._lock:
            if not self._ring or cursor >= self._last_id:
                return ReadResult([], False, min(cursor, self._last_id))
            oldest = self._ring[0].id
            gap = cursor < oldest - 1
            start = max(cursor + 1, oldest) - oldest
            events = [self._ring[i] for i in range(start, min(start + limit, len(self._ring)))]
        return ReadResult(events, gap, events[-1].id if events else cursor)

    def subscribe(self, loop: asyncio.AbstractEventLoop) -> Waiter:
        waiter = Waiter(loop)
        with self._lock:
            self._waiters.add(waiter)
        return waiter

    def unsubscribe(self, waiter: Waiter) -> None:
        with self._lock:
            self._waiters.discard(waiter)

    @property
    def subscribers(self) -> int:
        with self._lock:
            return len(self._waiters)


def sse_message(event: Event) -> str:
    """One event in the text/event-stream format (its data is one JSON line)."""
    return f"id: {event.id}\nevent: {event.kind}\ndata: {event.data}\n\n"
