"""One tool call's state machine, and the handle `Toolkit.submit` hands back.

A call is made, put in line, admitted (or withdrawn), run, and settled with its result; a cancel may
reach it at any point. rpent.tools.lifecycle drives those steps through the methods below; outside
rpent.tools a call is only the handle: `result()`, `cancel()`, `done()`, `stage`.

Stages: "queued" -> "running" -> "capturing" (robot tools) -> "done".
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel

from rpent.tools.api import StageCallback
from rpent.tools.context import CancelToken
from rpent.tools.result import ToolResult
from rpent.tools.tool import Tool

log = logging.getLogger(__name__)

#: What cancels a call in its toolkit (rpent.tools.lifecycle.CallLifecycle.cancel).
Canceller = Callable[["ToolCall", str], bool]


class ToolCall:
    """A handle on one call: wait for its result, or cancel exactly this call."""

    __slots__ = (
        "_admitted",
        "_canceller",
        "_done",
        "_gate",
        "_on_stage",
        "_result",
        "_token",
        "approvals",
        "arguments",
        "exclusive",
        "frames",
        "id",
        "model",
        "name",
        "stage",
        "tool",
    )

    def __init__(
        self,
        call_id: int,
        name: str,
        arguments: Any,
        on_stage: StageCallback | None,
        *,
        canceller: Canceller,
        waited_on: bool = False,
    ) -> None:
        """`waited_on`: another thread will wait for the result (submit), so the call needs a latch for it."""
        self.id = call_id
        self.name = name
        self.arguments = arguments
        self.tool: Tool | None = None
        self.model: BaseModel | None = None
        self.exclusive = True
        self.stage = "new"
        self.frames = 0
        self.approvals: list[dict[str, Any]] = []  # operator approvals this call asked for
        self._canceller = canceller
        self._token = CancelToken()
        # Latches made of plain locks (held until released once): far cheaper than Events, and a
        # call is waited on by at most a few threads. Both are made only when some thread must wait
        # (`waited_on`, `wait_in_line`): an uncontended execute_tool never blocks, and never pays for them.
        self._gate: threading.Lock | None = None  # released when the call is admitted (or withdrawn)
        self._done: threading.Lock | None = _latch() if waited_on else None  # released when the result is set
        self._admitted = False
        self._result: ToolResult | None = None
        self._on_stage = on_stage

    # ---- the handle -------------------------------------------------------------------------

    def done(self) -> bool:
        return self._result is not None

    def result(self, timeout: float | None = None) -> ToolResult:
        """Wait for the result; raise TimeoutError if it is not there within `timeout` seconds."""
        if self._result is None:
            assert self._done is not None, "only submitted calls are waited on"
            if not self._done.acquire(timeout=-1 if timeout is None else max(timeout, 0)):
                raise TimeoutError(f"tool call {self.id} ({self.name}) did not finish within {timeout} s")
            self._done.release()  # let other waiters through too
        assert self._result is not None
        return self._result

    def cancel(self, reason: str = "cancelled") -> bool:
        """Cancel this call: dropped if still queued, stopped at its next safe boundary if running."""
        return self._canceller(self, reason)

    @property
    def cancel_requested(self) -> bool:
        return self._token.is_set

    # ---- its life, driven by rpent.tools.lifecycle and the scheduler ----------------------------

    @property
    def token(self) -> CancelToken:
        """The flag the handler's ToolContext polls (ctx.check_cancelled) and hooks its stops on."""
        return self._token

    @property
    def cancel_reason(self) -> str:
        return self._token.reason or "cancelled"

    @property
    def admitted(self) -> bool:
        return self._admitted

    def enter_line(self) -> None:
        """The call is queued (the scheduler holds its lock)."""
        self.stage = "queued"

    def wait_in_line(self) -> None:
        """The call stays queued past its enqueueing: make the gate its thread will wait at (the
        scheduler holds its lock, so no admission can come in between)."""
        if not self._admitted:
            self._gate = _latch()

    def admit(self) -> None:
        """Let the call run: its waiting thread goes on (the scheduler holds its lock)."""
        self._admitted = True
        if self._gate is not None:
            self._gate.release()

    def wait_for_admission(self) -> bool:
        """Block until the call is admitted or withdrawn; True if it may run."""
        if self._gate is not None:
            self._gate.acquire()
        return self._admitted

    def release_withdrawn(self) -> None:
        """Wake the thread waiting for a call taken out of line: it sees the call was not admitted."""
        if self._gate is not None:
            self._gate.release()

    def request_cancel(self, reason: str) -> None:
        """Set the cancel flag: the handler stops at its next safe boundary (its stop hooks run now)."""
        self._token.set(reason)

    def set_stage(self, stage: str, message: str = "", progress: float | None = None) -> None:
        self.stage = stage
        if self._on_stage is not None:
            try:
                self._on_stage(stage, message, progress)
            except Exception:  # a broken progress listener must not break the call
                log.exception("stage callback of call %d failed", self.id)

    def settle(self, result: ToolResult) -> None:
        """The call has ended with `result`: "done" is reported after the result is readable, then waiters go on."""
        self._result = result
        self.stage = "done"
        if self._on_stage is not None:
            self.set_stage("done")
        if self._done is not None:
            self._done.release()

    def __repr__(self) -> str:
        return f"<ToolCall {self.id} {self.name} {self.stage}>"


def _latch() -> threading.Lock:
    lock = threading.Lock()
    lock.acquire()
    return lock
