"""The calls of one toolkit, from first to last: ids, admission, cancel, withdrawal and settlement.

One unit with the call's state machine (rpent.tools.call) and its admission (rpent.tools.scheduler):
the Toolkit checks a call's tool and arguments and says how it runs; everything about when it may run,
how a cancel reaches it and how it ends is decided here. Every call ends settled with a ToolResult,
whichever way it went.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Callable
from typing import Any

from rpent.record.values import utf8_text
from rpent.tools.api import StageCallback
from rpent.tools.call import ToolCall
from rpent.tools.result import ToolResult
from rpent.tools.scheduler import CallScheduler

log = logging.getLogger("rpent.tools.toolkit")  # one logger for the toolkit's whole story in run.log

#: Told of a call refused or dropped before it ran, before it settles (the toolkit writes its step line).
RefusalHook = Callable[[ToolCall, ToolResult], None]


class CallLifecycle:
    """Makes, queues, admits, cancels and settles a toolkit's calls. Thread-safe."""

    def __init__(self, on_refused: RefusalHook) -> None:
        self._scheduler = CallScheduler()
        self._ids = itertools.count(1)
        self._on_refused = on_refused

    # ---- a call's way through -----------------------------------------------------------------

    def new(self, name: str, arguments: Any, on_stage: StageCallback | None, *, waited_on: bool = False) -> ToolCall:
        """A fresh call with the next id; `waited_on`: another thread will wait for its result."""
        return ToolCall(next(self._ids), name, arguments, on_stage, canceller=self.cancel, waited_on=waited_on)

    def queue(self, call: ToolCall) -> None:
        """Put a checked call in line (`call.tool`, `call.model` and `call.exclusive` set); refused when
        the toolkit is closed or paused."""
        error = self._scheduler.enqueue(call)
        if error is not None:
            self.refuse(call, error)
        elif not call.done():  # a cancel may have dropped it already
            call.set_stage("queued")

    def refuse(self, call: ToolCall, error: str) -> None:
        """End a call that never ran with `error` (bad arguments, a closed toolkit, a cancel in line)."""
        # A refused call has no progress line (its tool_finished says refused): say so on the console.
        log.warning("call %d (%s) refused: %s", call.id, utf8_text(call.name), utf8_text(error))
        result = ToolResult(error=error)
        self._on_refused(call, result)
        call.settle(result)

    def abandon(self, call: ToolCall, error: str) -> None:
        """Checking or queueing the call failed unexpectedly: take it out of line and end it, unless it already runs."""
        self._scheduler.withdraw(call)
        if not call.done() and not call.admitted:
            self.refuse(call, error)

    def run(self, call: ToolCall, execute: Callable[[ToolCall], ToolResult]) -> None:
        """In the call's own thread: wait until it is admitted, run it, let the calls behind it start, settle it.

        A call withdrawn from the line returns at once (whoever withdrew it has settled it).
        `execute` returns the call's result and must not raise.
        """
        if not call.wait_for_admission():
            return
        try:
            result = execute(call)
        finally:
            self._scheduler.finished(call)
        call.settle(result)

    # ---- cancel --------------------------------------------------------------------------------

    def cancel(self, call: ToolCall, reason: str) -> bool:
        """Withdraw a queued call (it settles as cancelled) or flag a running one; False once it has ended."""
        queued = self._scheduler.withdraw(call)
        if queued is None:
            return False
        call.request_cancel(reason)  # outside the scheduler's lock: stop hooks may talk to hardware
        if queued:
            self._drop(call, reason)
        return True

    def cancel_by_id(self, call_id: int, reason: str) -> bool:
        call = self._scheduler.find(call_id)
        return self.cancel(call, reason) if call is not None else False

    def cancel_exclusive(self, reason: str) -> int:
        """Cancel every exclusive call, queued or running, without waiting and without pausing admission
        (read-only calls go on); how many were cancelled."""
        return sum(self.cancel(call, reason) for call in self._scheduler.exclusive_calls())

    def cancel_all_and_wait(self, timeout: float | None, reason: str) -> bool:
        """Stop admitting calls, cancel the queued and running ones, and wait for their cleanup;
        False if running calls had not ended within `timeout`. `resume()` admits calls again."""
        dropped, running = self._scheduler.pause()
        for call in dropped:
            call.request_cancel(reason)
            self._drop(call, reason)
        for call in running:
            call.request_cancel(reason)
        return self._scheduler.wait_idle(timeout)

    def _drop(self, call: ToolCall, reason: str) -> None:
        self.refuse(call, f"cancelled before it started: {reason}")
        call.release_withdrawn()

    # ---- admission as a whole ------------------------------------------------------------------

    def resume(self) -> None:
        self._scheduler.resume()

    def close(self, timeout: float | None) -> bool:
        """Refuse new calls for good and wait for the queued and running ones; True the first time only."""
        if not self._scheduler.close():
            return False
        if not self._scheduler.wait_idle(timeout):
            log.warning("close: calls still running after %.1f s", timeout)
        return True

    @property
    def closed(self) -> bool:
        return self._scheduler.closed
