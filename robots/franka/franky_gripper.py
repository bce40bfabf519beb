"""`Gripper` on franky's Franka Hand client: widths in metres, cancellable waits.

A stop is sent from a helper thread: franky's `stop_async` holds the GIL while it waits for
the hand, which would starve an in-process simulator, while the blocking `stop()` releases it.
The hand answers the interrupted command with "aborted", which ends the waiting call.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

import franky

from robots.franka.connect import connect_with_timeout
from robots.franka.safety import SafetyEnvelope
from rpent.runtime.arm import RuntimeFault
from rpent.runtime.types import GripperState, MotionOutcome

log = logging.getLogger(__name__)

_WAIT_SLICE_S = 0.02
# After a stop, how long the interrupted command may take to come back as "aborted".
_ABORT_GRACE_S = 1.0


class FrankyGripper:
    """The Franka Hand of one arm."""

    def __init__(
        self,
        host: str,
        *,
        name: str = "gripper",
        envelope: SafetyEnvelope | None = None,
        speed_m_s: float = 0.05,
        connect_timeout_s: float = 5.0,
    ) -> None:
        self.name = name
        self.host = host
        self.envelope = envelope or SafetyEnvelope(arm_name=name)
        self.speed_m_s = speed_m_s
        self._stop_requested = threading.Event()
        self._stopper: threading.Thread | None = None
        self._gripper: Any = connect_with_timeout(lambda: franky.Gripper(host), "gripper", host, connect_timeout_s)

    def state(self) -> GripperState:
        try:
            st = self._gripper.state
            return GripperState(width_m=float(st.width), max_width_m=float(st.max_width), grasped=bool(st.is_grasped))
        except Exception as exc:
            raise RuntimeFault(f"{self.name} at {self.host}: cannot read gripper state: {exc}") from exc

    def move(self, width_m: float, timeout_s: float | None = None, cancel: threading.Event | None = None) -> MotionOutcome:
        self.envelope.check_gripper(width_m=width_m)
        return self._run(lambda g: g.move_async(float(width_m), self.speed_m_s), timeout_s, cancel)

    def grasp(
        self,
        width_m: float,
        force_n: float,
        timeout_s: float | None = None,
        cancel: threading.Event | None = None,
        epsilon_inner_m: float = 0.005,
        epsilon_outer_m: float = 0.08,
    ) -> MotionOutcome:
        """Close until the fingers are stopped; grasped if the final width is within the tolerances."""
        self.envelope.check_gripper(width_m=width_m, force_n=force_n)
        outcome = self._run(
            lambda g: g.grasp_async(
                float(width_m), self.speed_m_s, float(force_n), float(epsilon_inner_m), float(epsilon_outer_m)
            ),
            timeout_s,
            cancel,
        )
        if outcome.finished:
            return MotionOutcome(finished=True, extra={"grasped": bool(outcome.extra.get("success"))})
        return outcome

    def open(self, timeout_s: float | None = None, cancel: threading.Event | None = None) -> MotionOutcome:
        limit = self.envelope.limits.max_gripper_width_m
        width = min(self.state().max_width_m or limit, limit)
        return self.move(width, timeout_s, cancel)

    def _run(self, start: Callable[[Any], Any], timeout_s: float | None, cancel: threading.Event | None) -> MotionOutcome:
        stopper = self._stopper
        if stopper is not None:
            stopper.join(_ABORT_GRACE_S)  # let a previous stop land before the next command
        self._stop_requested.clear()
        try:
            future = start(self._gripper)
        except Exception as exc:
            raise RuntimeFault(f"{self.name} at {self.host}: command rejected: {exc}") from exc
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        timed_out = False
        while True:
            if cancel is not None and cancel.is_set() and not self._stop_requested.is_set():
                self.stop()
            if deadline is not None and not timed_out and time.monotonic() >= deadline:
                timed_out = True
                self.stop()
            if self._stop_requested.is_set():
                return self._after_stop(future, timed_out, timeout_s)
            if future.wait(_WAIT_SLICE_S):
                try:
                    ok = bool(future.get())
                except Exception as exc:
                    if self._stop_requested.is_set():
                        return self._after_stop(future, timed_out, timeout_s)
                    raise RuntimeFault(f"{self.name} at {self.host}: gripper command failed: {exc}") from exc
                return MotionOutcome(finished=True, extra={"success": ok})

    def _after_stop(self, future: Any, timed_out: bool, timeout_s: float | None) -> MotionOutcome:
        detail = f"timed out after {timeout_s} s; gripper stopped" if timed_out else "gripper stopped"
        if not future.wait(_ABORT_GRACE_S):
            detail += " (the hand did not confirm the abort)"
        return MotionOutcome(finished=False, stopped=True, timed_out=timed_out, detail=detail)

    def stop(self) -> None:
        self._stop_requested.set()
        self._stopper = threading.Thread(target=self._send_stop, name=f"{self.name}-stop", daemon=True)
        self._stopper.start()

    def _send_stop(self) -> None:
        try:
            self._gripper.stop()
        except Exception as exc:  # a failing stop must not raise into a cancel path
            log.warning("%s: stop failed: %s", self.name, exc)

    def close(self) -> None:
        stopper = self._stopper
        if stopper is not None:
            stopper.join(_ABORT_GRACE_S)
