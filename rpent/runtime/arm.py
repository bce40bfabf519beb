"""Ports for arms and grippers, and the operator approval channel for motions.

A motion is started asynchronously and then awaited, so another thread (the one that
cancels a tool call) can stop it at once:

    arm.start_cartesian([target], speed_factor=0.2)
    ctx.on_cancel(arm.stop)                # stop reaches the robot from the cancelling thread
    outcome = arm.wait(timeout_s=10.0, cancel=event)

Implementations check their safety envelope in every `start_*` and raise `MotionRefused`
before anything is sent to the robot.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from typing import Protocol, runtime_checkable

from rpent.runtime.types import ArmState, GripperState, MotionOutcome, Pose

log = logging.getLogger(__name__)


class RuntimeFault(RuntimeError):
    """The robot or its connection failed (lost link, controller error, simulator gone)."""


class TrajectoryFailure(RuntimeFault):
    """The arm's own trajectory generator gave up during a motion (not the robot: no reflex, no lost
    link) and the arm was stopped where it was; the same target, planned again from the measured
    state, can go through (robots.franka.motion does it once)."""


class MotionRefused(ValueError):
    """A command was refused before it reached the robot; names the limit and the value."""

    def __init__(self, limit: str, value: object, rule: str) -> None:
        self.limit = limit
        self.value = value
        self.rule = rule
        super().__init__(f"refused: {limit} = {value} violates {rule}; the robot did not move")


@runtime_checkable
class Arm(Protocol):
    """A position-controlled arm. Poses are end-effector poses in the robot base frame."""

    name: str

    def state(self) -> ArmState: ...

    def start_cartesian(self, waypoints: Sequence[Pose], speed_factor: float | None = None) -> None:
        """Start moving through absolute Cartesian waypoints; returns once the motion is sent."""
        ...

    def start_relative(
        self,
        translation_m: Sequence[float],
        rotation: Sequence[float] = (0.0, 0.0, 0.0, 1.0),
        speed_factor: float | None = None,
    ) -> Pose:
        """Start a move by an offset in the base frame; returns the absolute target it sent."""
        ...

    def start_joints(self, waypoints: Sequence[Sequence[float]], speed_factor: float | None = None) -> None: ...

    def wait(self, timeout_s: float | None = None, cancel: threading.Event | None = None) -> MotionOutcome:
        """Block until the running motion ends, is stopped, times out or `cancel` is set.

        A timeout or a set `cancel` stops the arm before returning. Raises RuntimeFault when
        the motion failed for a reason other than a requested stop.
        """
        ...

    def stop(self) -> None:
        """Stop the running motion now. Safe to call from any thread, any number of times."""
        ...

    def recover(self) -> bool: ...

    def close(self) -> None: ...


@runtime_checkable
class Gripper(Protocol):
    """A parallel gripper. Widths are the distance between the fingers in metres."""

    name: str

    def state(self) -> GripperState: ...

    def move(
        self, width_m: float, timeout_s: float | None = None, cancel: threading.Event | None = None
    ) -> MotionOutcome: ...

    def grasp(
        self,
        width_m: float,
        force_n: float,
        timeout_s: float | None = None,
        cancel: threading.Event | None = None,
    ) -> MotionOutcome:
        """Close on an object; `outcome.extra["grasped"]` says whether something is held."""
        ...

    def open(self, timeout_s: float | None = None, cancel: threading.Event | None = None) -> MotionOutcome: ...

    def stop(self) -> None: ...

    def close(self) -> None: ...


#: `ToolContext.on_cancel`: runs a callback the moment the call is cancelled (at once if it already
#: was) and returns a function that unregisters it.
OnCancel = Callable[[Callable[[], object]], Callable[[], None]]


def stop_quietly(device: Arm | Gripper) -> None:
    """`device.stop()` for cancel and clean-up paths, which must go on to stop everything else: a failure
    is logged, not raised. Any arm or gripper: in this process, or served by another (a RuntimeProxy)."""
    try:
        device.stop()
    except Exception as exc:
        log.warning("%s: stop failed: %s", getattr(device, "name", device), exc)


@runtime_checkable
class ApprovalChannel(Protocol):
    """Asks a human operator to approve a motion before it is sent.

    `request` blocks for at most `timeout_s` and returns False on deny or timeout. Given `on_cancel`,
    it registers a callback there that withdraws the question: the wait ends at once (False), and
    the id the operator saw is retired, so a late answer to it authorises nothing. A callback
    rather than an Event, so the channel is woken instead of polling one. A channel may name who
    answers on it in an `operator` attribute ("dashboard", "terminal (alice)"): each approval's
    record says so (else it names the channel's class).
    """

    def request(
        self, request_id: str, description: str, timeout_s: float, on_cancel: OnCancel | None = None
    ) -> bool: ...
