"""What a tool handler gets besides its arguments: the runtime, shared state and cancellation."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import numpy as np

if TYPE_CHECKING:
    from rpent.memory import MemoryManager
    from rpent.record.step_record import StepRecord

log = logging.getLogger(__name__)

RuntimeT = TypeVar("RuntimeT")


class ToolCancelled(Exception):
    """Raised by `ToolContext.check_cancelled()` once the call was cancelled."""


class CancelToken:
    """One call's cancellation flag, with callbacks run the moment it is set.

    Callbacks exist so a motion can be stopped from the cancelling thread at once, rather than
    when the handler next polls (a polling handler could be stuck in a blocking wait). The Event
    behind `wait` is made only when someone waits: most calls are never cancelled or waited on.
    """

    __slots__ = ("_callbacks", "_event", "is_set", "reason")

    # One lock for all tokens: cancelling and waiting are rare, and a token per call is made on
    # the hot path, where allocating a lock each time shows up in the executor's overhead.
    _lock = threading.Lock()

    def __init__(self) -> None:
        self._event: threading.Event | None = None
        self._callbacks: list[Callable[[], Any]] | None = None
        self.is_set = False
        self.reason = ""

    def wait(self, timeout: float | None) -> bool:
        with self._lock:
            if self.is_set:
                return True
            if self._event is None:
                self._event = threading.Event()
            event = self._event
        return event.wait(timeout)

    def set(self, reason: str = "cancelled") -> bool:
        """Set the flag and run the callbacks once; False if it was already set."""
        with self._lock:
            if self.is_set:
                return False
            self.reason = reason
            self.is_set = True
            event, callbacks, self._callbacks = self._event, self._callbacks or [], None
        if event is not None:
            event.set()
        for callback in callbacks:
            _run_callback(callback)
        return True

    def add_callback(self, callback: Callable[[], Any]) -> None:
        with self._lock:
            if not self.is_set:
                if self._callbacks is None:
                    self._callbacks = []
                self._callbacks.append(callback)
                return
        _run_callback(callback)

    def remove_callback(self, callback: Callable[[], Any]) -> None:
        with self._lock:
            if self._callbacks and callback in self._callbacks:
                self._callbacks.remove(callback)


def _run_callback(callback: Callable[[], Any]) -> None:
    try:
        callback()
    except Exception:  # a failing stop hook must not stop the others or the canceller
        log.exception("cancel callback %r failed", callback)


class ToolContext(Generic[RuntimeT]):
    """Injected by the executor as the keyword-only `ctx` argument of every tool handler."""

    __slots__ = (
        "_approval_sink", "_cancel", "_frame_sink", "_stage_sink", "_stop_sink", "call_id", "last_step", "memory",
        "output_dir", "robot", "state", "tool_name",
    )

    def __init__(
        self,
        *,
        robot: RuntimeT,
        state: dict[str, Any],
        memory: MemoryManager | None,
        output_dir: Path | None,
        call_id: int,
        tool_name: str,
        cancel_token: CancelToken,
        frame_sink: Callable[[np.ndarray], None] | None,
        stage_sink: Callable[[str, str, float | None], None] | None,
        approval_sink: Callable[[dict[str, Any]], None] | None = None,
        last_step: StepRecord | None = None,
        stop_sink: Callable[[str], dict[str, Any]] | None = None,
    ) -> None:
        self.robot = robot
        self.state = state
        self.memory = memory
        self.output_dir = output_dir
        self.call_id = call_id
        self.tool_name = tool_name
        self._cancel = cancel_token
        self._frame_sink = frame_sink
        self._stage_sink = stage_sink
        self._approval_sink = approval_sink
        self._stop_sink = stop_sink
        #: The latest observation step (the StepRecord of the last action the robot was observed
        #: after; step 0 before any): the scene a read-only tool sees now, and what it analyses.
        self.last_step = last_step

    def latch_stop(self, reason: str) -> dict[str, Any]:
        """Latch the toolkit's stop (rpent.tools.stop_latch) on the model's behalf; the event."""
        if self._stop_sink is None:
            raise RuntimeError("this toolkit has no stop latch")
        return self._stop_sink(reason)

    @property
    def cancelled(self) -> bool:
        return self._cancel.is_set

    def check_cancelled(self) -> None:
        """Raise ToolCancelled if this call was cancelled; call it at every safe boundary."""
        if self._cancel.is_set:
            raise ToolCancelled(self._cancel.reason or "cancelled")

    def wait_cancelled(self, timeout_s: float) -> bool:
        """Sleep up to `timeout_s`, waking at once on cancel; True if cancelled."""
        return self._cancel.wait(timeout_s)

    def on_cancel(self, callback: Callable[[], Any]) -> Callable[[], None]:
        """Run `callback` (from the cancelling thread) the moment this call is cancelled.

        Runs at once if the call is already cancelled. Returns a function that unregisters it.
        """
        self._cancel.add_callback(callback)
        return lambda: self._cancel.remove_callback(callback)

    def record_frame(self, rgb: np.ndarray | Mapping[str, np.ndarray]) -> None:
        """Add an RGB uint8 frame to the episode video (and this action's clip): one picture, or
        {camera name: picture} of several cameras taken together, which the video shows tiled and labelled."""
        if self._frame_sink is not None:
            self._frame_sink(rgb)

    def record_approval(
        self, *, motion: str, outcome: str, by: str, requested_at: float, answered_at: float, timeout_s: float
    ) -> None:
        """Put an operator's answer to a motion approval on this call's record (steps.jsonl's
        `approvals`, result.json's summary). `outcome`: approved, denied, timed_out or cancelled;
        `by`: who answered (the channel: the dashboard, the terminal, a ROS service); times are epoch seconds."""
        if self._approval_sink is not None:
            self._approval_sink({
                "motion": motion, "outcome": outcome, "by": by, "requested_at": round(requested_at, 3),
                "answered_at": round(answered_at, 3), "waited_s": round(answered_at - requested_at, 3),
                "timeout_s": timeout_s,
            })

    def report(self, stage: str, message: str = "", progress: float | None = None) -> None:
        """Tell whoever waits on this call (a ROS action client, the dashboard) how it is going."""
        if self._stage_sink is not None:
            self._stage_sink(stage, message, progress)
