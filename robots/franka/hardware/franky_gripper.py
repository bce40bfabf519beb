"""`Gripper` on franky's Franka Hand client: widths in metres, cancellable waits.

A stop is sent from a helper thread: franky's `stop_async` holds the GIL while it waits for
the hand, which would starve an in-process simulator, while the blocking `stop()` releases it.
The hand answers the interrupted command with "aborted", which ends the waiting call.

`grasped` is measured, not franky's word for it: franky's grasp succeeds whenever the final width
is within the epsilons, which for "close to 0 with a wide epsilon" includes closing on empty air.
A grasp holds something only if the fingers stopped above a small minimum width and short of where
they started. `stop()` stops only a running gripper command, so a stop (the stop tool, a cancel, a
node shutting down) never loosens a held object.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

import franky

from robots.franka.hardware.commands import CommandLog
from robots.franka.hardware.connect import RobotLink, connect_with_timeout
from robots.franka.safety import SafetyEnvelope
from rpent.runtime.arm import RuntimeFault
from rpent.runtime.types import GripperState, MotionOutcome

log = logging.getLogger(__name__)

_WAIT_SLICE_S = 0.02
# After a stop, how long the interrupted command may take to come back as "aborted".
_ABORT_GRACE_S = 1.0
_GRIPPER_PORT = 1338
# Fingers that end less than this short of where they started did not stop on anything.
_CLOSED_BY_M = 0.001


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
        link: RobotLink | None = None,
    ) -> None:
        self.name = name
        self.host = host
        self.envelope = envelope or SafetyEnvelope(arm_name=name)
        self.speed_m_s = speed_m_s
        self.link = link or RobotLink(host)
        self._stop_requested = threading.Event()
        self._busy = threading.Event()
        self._stopper: threading.Thread | None = None
        self._stop_error: str | None = None
        self._holding = False
        #: The last command sent, for the record's stream (robots.franka.recording).
        self.commands = CommandLog()
        before = self.link.connections(_GRIPPER_PORT)
        self._gripper: Any = connect_with_timeout(lambda: franky.Gripper(host), "gripper", host, connect_timeout_s)
        self.link.watch(_GRIPPER_PORT, before)

    def state(self) -> GripperState:
        self.link.check(self.name)
        try:
            st = self._gripper.state
            width, max_width, is_grasped = float(st.width), float(st.max_width), bool(st.is_grasped)
        except franky.NetworkException as exc:
            raise self.link.lost_fault(self.name, str(exc)) from exc
        except Exception as exc:
            raise RuntimeFault(f"{self.name} at {self.host}: cannot read gripper state: {exc}") from exc
        # Still holding: our grasp found an object, the hand still says so, and the fingers did not close on.
        grasped = self._holding and is_grasped and width > self.envelope.limits.grasp_min_width_m
        return GripperState(width_m=width, max_width_m=max_width, grasped=grasped)

    def health(self) -> dict[str, Any]:
        """What the hand reports about itself (for /diagnostics)."""
        self.link.check(self.name)
        try:
            st = self._gripper.state
            return {"temperature (C)": float(st.temperature), "width (m)": float(st.width),
                    "max width (m)": float(st.max_width), "hand reports a grasp": bool(st.is_grasped)}
        except franky.NetworkException as exc:
            raise self.link.lost_fault(self.name, str(exc)) from exc
        except Exception as exc:
            raise RuntimeFault(f"{self.name} at {self.host}: cannot read gripper state: {exc}") from exc

    def move(self, width_m: float, timeout_s: float | None = None, cancel: threading.Event | None = None) -> MotionOutcome:
        self.envelope.check_gripper(width_m=width_m)
        self._holding = False
        self.commands.sent("move", width_m=float(width_m))
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
        """Close until the fingers are stopped; grasped only if they stopped on something."""
        self.envelope.check_gripper(width_m=width_m, force_n=force_n)
        self._holding = False
        start_width = self.state().width_m
        self.commands.sent("grasp", width_m=float(width_m))
        outcome = self._run(
            lambda g: g.grasp_async(
                float(width_m), self.speed_m_s, float(force_n), float(epsilon_inner_m), float(epsilon_outer_m)
            ),
            timeout_s,
            cancel,
        )
        if not outcome.finished:
            return outcome
        final_width = self.state().width_m
        stopped_on_something = (
            self.envelope.limits.grasp_min_width_m < final_width < start_width - _CLOSED_BY_M
        )
        self._holding = bool(outcome.extra.get("success")) and stopped_on_something
        return MotionOutcome(
            finished=True, extra={"grasped": self._holding, "width_before_m": start_width, "width_m": final_width}
        )

    def open(self, timeout_s: float | None = None, cancel: threading.Event | None = None) -> MotionOutcome:
        limit = self.envelope.limits.max_gripper_width_m
        width = min(self.state().max_width_m or limit, limit)
        return self.move(width, timeout_s, cancel)

    def _run(self, start: Callable[[Any], Any], timeout_s: float | None, cancel: threading.Event | None) -> MotionOutcome:
        stopper = self._stopper
        if stopper is not None:
            stopper.join(_ABORT_GRACE_S)  # let a previous stop land before the next command
        self._stop_requested.clear()
        self.link.check(self.name)
        self._busy.set()
        try:
            return self._await(start, timeout_s, cancel)
        finally:
            self._busy.clear()

    def _await(self, start: Callable[[Any], Any], timeout_s: float | None, cancel: threading.Event | None) -> MotionOutcome:
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
            self.link.check(self.name)  # a vanished hand never answers the command: notice it here
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

    @property
    def busy(self) -> bool:
        """A gripper command is running."""
        return self._busy.is_set()

    def stop(self) -> None:
        """Stop a running gripper command; with none running there is nothing to stop (a grasp stays held)."""
        if not self._busy.is_set():
            self._stop_error = None  # nothing sent now: an older stop's failure is not this stop's
            return
        self._stop_requested.set()
        self._stop_error = None
        self._stopper = threading.Thread(target=self._send_stop, name=f"{self.name}-stop", daemon=True)
        self._stopper.start()

    def confirm_stopped(self, timeout_s: float = _ABORT_GRACE_S) -> None:
        """Wait for the stop sent last; raise RuntimeFault if the hand did not take it."""
        stopper = self._stopper
        if stopper is not None:
            stopper.join(timeout_s)
            if stopper.is_alive():
                raise RuntimeFault(f"{self.name} at {self.host}: the hand did not confirm the stop within {timeout_s} s")
        if self._stop_error is not None:
            raise RuntimeFault(f"{self.name} at {self.host}: stop failed: {self._stop_error}")

    def _send_stop(self) -> None:
        try:
            self._gripper.stop()
        except Exception as exc:  # reported by confirm_stopped; a cancel path must not raise
            self._stop_error = str(exc)
            log.warning("%s: stop failed: %s", self.name, exc)

    def close(self) -> None:
        stopper = self._stopper
        if stopper is not None:
            stopper.join(_ABORT_GRACE_S)
        self.link.close()
