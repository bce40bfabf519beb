"""One tool call in flight: what the scheduler queues and what `Toolkit.submit` hands back."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from rpent.tools.context import CancelToken
from rpent.tools.result import ToolResult
from rpent.tools.tool import Tool

if TYPE_CHECKING:
    from rpent.tools.toolkit import Toolkit

log = logging.getLogger(__name__)

StageCallback = Callable[[str, str, "float | None"], Any]


class ToolCall:
    """A handle on one call: wait for its result, or cancel exactly this call.

    Stages: "queued" -> "running" -> "capturing" (robot tools) -> "done".
    """

    __slots__ = (
        "_admitted",
        "_done",
        "_gate",
        "_on_stage",
        "_result",
        "_token",
        "_toolkit",
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
        toolkit: Toolkit,
        call_id: int,
        name: str,
        arguments: Any,
        on_stage: StageCallback | None,
    ) -> None:
        self.id = call_id
        self.name = name
        self.arguments = arguments
        self.tool: Tool | None = None
        self.model: BaseModel | None = None
        self.exclusive = True
        self.stage = "new"
        self.frames = 0
        self.approvals: list[dict[str, Any]] = []  # operator approvals this call asked for
        self._toolkit = toolkit
        self._token = CancelToken()
        # Latches made of plain locks (held until released once): far cheaper than Events, and a
        # call is waited on by at most a few threads.
        # Both are made only when some thread must wait (see Toolkit._enqueue and submit): an
        # uncontended execute_tool never blocks, and never pays for them.
        self._gate: threading.Lock | None = None  # released when the scheduler admits (or drops) the call
        self._done: threading.Lock | None = None  # released when the result is set
        self._admitted = False
        self._result: ToolResult | None = None
        self._on_stage = on_stage

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
        return self._toolkit._cancel_call(self, reason)

    @property
    def cancel_requested(self) -> bool:
        return self._token.is_set

    def _set_stage(self, stage: str, message: str = "", progress: float | None = None) -> None:
        self.stage = stage
        if self._on_stage is not None:
            try:
                self._on_stage(stage, message, progress)
            except Exception:  # a broken progress listener must not break the call
                log.exception("stage callback of call %d failed", self.id)

    def _finish(self, result: ToolResult) -> None:
        self._result = result
        self.stage = "done"
        if self._on_stage is not None:
            self._set_stage("done")
        if self._done is not None:
            self._done.release()

    def __repr__(self) -> str:
        return f"<ToolCall {self.id} {self.name} {self.stage}>"


def _latch() -> threading.Lock:
    lock = threading.Lock()
    lock.acquire()
    return lock
