"""Which of a toolkit's calls may run when: its queue, its running calls, and whether it admits calls."""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rpent.tools.call import ToolCall

_OPEN, _PAUSED, _CLOSED = "open", "paused", "closed"


class CallScheduler:
    """Admits queued calls: exclusive calls one at a time in arrival order, read-only calls together,
    and a queued exclusive call before read-only calls that arrived after it.

    Admission (`ToolCall.admit`) lets the call's waiting thread go on; the thread runs the call and
    then reports it `finished`. Admitting can be paused (an operator cancel) and closed for good.
    """

    def __init__(self) -> None:
        # One lock guards the scheduler; hot paths take it directly (a Condition's `with` is a Python
        # call); the Condition on the same lock only serves threads waiting for the toolkit to drain.
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._pending: list[ToolCall] = []
        self._active: dict[int, ToolCall] = {}
        self._exclusive_active = False
        self._drain_waiters = 0
        self._admission = _OPEN
        self._closed_once = False

    @property
    def closed(self) -> bool:
        return self._admission == _CLOSED

    def enqueue(self, call: ToolCall) -> str | None:
        """Put `call` in line and admit what may start; the refusal if calls are not admitted now."""
        with self._lock:
            if self._admission != _OPEN:
                state = "closed" if self._admission == _CLOSED else "paused (calls were cancelled by the operator)"
                return f"toolkit is {state}; '{call.name}' was not run"
            call.enter_line()
            self._pending.append(call)
            self._dispatch()
            call.wait_in_line()  # not admitted at once: its thread will wait for admission
        return None

    def find(self, call_id: int) -> ToolCall | None:
        with self._lock:
            return self._active.get(call_id) or next((c for c in self._pending if c.id == call_id), None)

    def withdraw(self, call: ToolCall) -> bool | None:
        """Take `call` out of line: True if it was queued, False if it runs, None if it has ended."""
        with self._lock:
            if call.done():
                return None
            if call not in self._pending:
                return False
            self._pending.remove(call)
            self._dispatch()  # a dropped exclusive call may unblock read-only calls behind it
            if self._drain_waiters:
                self._cond.notify_all()
            return True

    def finished(self, call: ToolCall) -> None:
        """An admitted call has run: let the calls behind it start."""
        with self._lock:
            del self._active[call.id]
            if call.exclusive:
                self._exclusive_active = False
            self._dispatch()
            if self._drain_waiters:
                self._cond.notify_all()

    def exclusive_calls(self) -> list[ToolCall]:
        """The exclusive calls queued or running now (the motions a latched stop ends)."""
        with self._lock:
            return [c for c in [*self._active.values(), *self._pending] if c.exclusive]

    def pause(self) -> tuple[list[ToolCall], list[ToolCall]]:
        """Stop admitting calls (unless closed); the queued calls, now out of line, and the running ones."""
        with self._lock:
            if self._admission == _OPEN:
                self._admission = _PAUSED
            dropped, self._pending = self._pending, []
            return dropped, list(self._active.values())

    def resume(self) -> None:
        with self._lock:
            if self._admission == _PAUSED:
                self._admission = _OPEN
                self._dispatch()

    def close(self) -> bool:
        """Refuse new calls for good; True the first time only."""
        with self._lock:
            self._admission = _CLOSED
            first, self._closed_once = not self._closed_once, True
            return first

    def wait_idle(self, timeout: float | None) -> bool:
        """Wait until nothing is queued or running; False if `timeout` passed first."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._lock:
            self._drain_waiters += 1
            try:
                while self._active or self._pending:
                    remaining = None if deadline is None else deadline - time.monotonic()
                    if remaining is not None and remaining <= 0:
                        return False
                    self._cond.wait(remaining)
            finally:
                self._drain_waiters -= 1
        return True

    def _dispatch(self) -> None:
        """Admit every queued call that may start now (caller holds the lock).

        Admission hands the call straight to its waiting thread (ToolCall.admit), so only the
        threads that can run wake up.
        """
        if self._exclusive_active or not self._pending:
            return
        admitted = 0
        for call in self._pending:
            if call.exclusive:
                if not self._active and admitted == 0:
                    self._admit(call)
                    admitted += 1
                break  # nothing queued behind an exclusive call may overtake it
            self._admit(call)
            admitted += 1
        if admitted:
            del self._pending[:admitted]

    def _admit(self, call: ToolCall) -> None:
        self._active[call.id] = call
        if call.exclusive:
            self._exclusive_active = True
        call.admit()
