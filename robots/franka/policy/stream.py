"""Stream a chunk of policy actions to one arm at the control rate, every step shaped and checked before
franky sees it.

This loop runs where the arm's franky connection is (the toolkit's process, or the arm node with
runtime_mode ros), so no step crosses a process or a ROS hop. Each step reads the measured joints,
turns the action into a joint target (robots.franka.policy.droid: DROID's q + 0.2 rad per unit),
shapes it to the arm's velocity limits and checks it (robots.franka.policy.step_safety), and only
then commands the arm, replacing the previous step's motion:

- `motion: velocity`: the shaped joint velocity held one period, then a brake to rest (franky's
  velocity waypoints, with the step's bounded acceleration and jerk). The next step replaces it before
  it brakes, so a steady policy runs without a pause; a step not followed by another (the loop late,
  paused or gone) ends with the arm at rest, never with a motion finished while the arm moves;
- `motion: position`: a joint motion to the shaped target, at rest there unless replaced.

Before the first step the whole chunk is checked as the measured joints predict it (each shaped
target reached), so a chunk heading out of the envelope is refused before the arm moves at all; the
step check with the measured joints still guards every step, on to where the arm comes to rest if
no next step follows. A refusal stops the arm.

The steps keep the robot's own clock (franky's state time), not this machine's: a franky motion
lasts its duration in the robot's time, and franky-sim's time runs slower than the wall clock on a
loaded machine (a dual-arm simulation with its cameras ran at 0.1-0.5x), so steps paced by the wall
clock replaced each velocity before the arm had run it and the arm covered a fraction of each
step. On a real arm the two clocks are one.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from robots.franka.hardware.franky_arm import at_rest
from robots.franka.policy import droid
from robots.franka.policy.step_safety import KeepClear, StepRefused, check_action, check_step, shape_step
from rpent.runtime.arm import RuntimeFault

if TYPE_CHECKING:
    import threading

    from robots.franka.hardware.franky_arm import FrankyArm

MOTIONS = ("velocity", "position")
# How long a stopped arm may take to come to rest before the report says nothing of it.
REST_TIMEOUT_S = 2.0


def run(
    arm: FrankyArm,
    actions: Sequence[Sequence[float]],
    *,
    action_space: str = "joint_velocity",
    motion: str = "velocity",
    period_s: float = 1.0 / droid.CONTROL_HZ,
    first_step: int = 0,
    keep_clear: Sequence[KeepClear | Mapping[str, Any]] = (),
    cancel: threading.Event | None = None,
) -> dict[str, Any]:
    """Run `actions` (n x 7 joint values; the gripper is not the arm's); returns what happened.

    The result: `steps` run, `stopped` (None when the chunk ran out; "stopped", "refused",
    "reflex" or "fault"), `refused` (limit, value, rule, step), `error`, the measured `joints_rad`
    at the end; per step `step_clock_s` (the robot's clock when it was commanded), `step_times_s`
    (this machine's monotonic clock, the same), `check_ms` (its shaping and envelope check),
    `tracking_error_rad` (the largest joint gap between its target and the measured joints one
    period later) and `scale` (1.0: run as asked; below: shaped down to a velocity limit; for the
    lowest, `bound` names the joint and the limit). A stop adds `stop`: when it was sent
    (monotonic), the fastest joint speed then, and the robot-clock seconds until the arm was at rest.
    """
    if action_space not in droid.ACTION_SPACES:
        raise ValueError(f"action_space: must be one of {list(droid.ACTION_SPACES)}, got {action_space!r}")
    if motion not in MOTIONS:
        raise ValueError(f"motion: must be one of {list(MOTIONS)}, got {motion!r}")
    if not 0.001 <= period_s <= 1.0:
        raise ValueError(f"period_s: must be from 0.001 to 1 s, got {period_s}")
    chunk = np.asarray(actions, dtype=float)
    if chunk.ndim != 2 or chunk.shape[1] < 7 or len(chunk) == 0:
        raise ValueError(f"actions: must be n x 7 joint values (n >= 1), got shape {chunk.shape}")
    clear = [k if isinstance(k, KeepClear) else KeepClear.from_dict(dict(k)) for k in keep_clear]
    report: dict[str, Any] = {"steps": 0, "stopped": None, "refused": None, "error": None, "step_clock_s": [],
                              "step_times_s": [], "check_ms": [], "tracking_error_rad": [], "scale": [],
                              "bound": None}
    arm.stop_requested.clear()
    try:
        state = arm.state()
        report["_q"] = state.joints
        _check_ahead(arm, state.joints, state.joint_velocities, chunk, action_space, period_s, first_step, clear)
        _stream(arm, chunk, report, action_space, motion, period_s, first_step, clear, cancel)
    except StepRefused as refusal:
        arm.stop_quietly()
        # Where the arm was when the step was refused: it is brought to rest from there.
        refused = {**refusal.to_dict(), "joints_rad": [round(v, 6) for v in report.pop("_q")]}
        report.update(stopped="refused", refused=refused, error=str(refusal))
    except RuntimeFault as exc:
        arm.stop_quietly()
        report.update(stopped="reflex" if "reflex" in str(exc).lower() else "fault", error=str(exc))
    report.pop("_q", None)
    report["joints_rad"] = _measured(arm)
    return report


def _stream(arm: FrankyArm, chunk: np.ndarray, report: dict[str, Any], action_space: str, motion: str,
            period_s: float, first_step: int, clear: list[KeepClear], cancel: threading.Event | None) -> np.ndarray | None:
    start = arm.clock_s()
    target: np.ndarray | None = None
    for k in range(len(chunk) + 1):
        if k > 0 and _wait_for_clock(arm, start + k * period_s):
            _stopped(arm, report)
            return target
        if (cancel is not None and cancel.is_set()) or arm.stop_requested.is_set():
            arm.stop_quietly()
            _stopped(arm, report)
            return target
        state = arm.state()
        report["_q"] = state.joints
        q = np.asarray(state.joints)
        if target is not None:
            report["tracking_error_rad"].append(round(float(np.max(np.abs(q - target))), 6))
        if state.has_errors:
            raise RuntimeFault(f"{arm.name}: the robot reports an error (a reflex) at step {first_step + k}")
        if k == len(chunk):
            return target
        checked = time.perf_counter()
        step = _shaped(arm, chunk[k], q, action_space, period_s, first_step + k)
        check_step(arm.envelope, q, state.joint_velocities, step, period_s, first_step + k, clear, arm.step_brake)
        report["check_ms"].append(round((time.perf_counter() - checked) * 1000, 4))
        # The step's due time and the state it was computed from are what the record's stream samples.
        if motion == "velocity":
            arm.stream_joint_velocity(step.velocity, period_s, clock_s=start + k * period_s, measured=state)
        else:
            arm.stream_joint_target(step.target, clock_s=start + k * period_s, measured=state)
        scale = round(step.scale, 4)
        if step.bound is not None and scale < min(report["scale"], default=1.0):
            report["bound"] = step.bound
        report["scale"].append(scale)
        report["step_times_s"].append(time.monotonic())
        report["step_clock_s"].append(arm.clock_s())
        report["steps"] += 1
        target = step.target
    return target


def _wait_for_clock(arm: FrankyArm, due_s: float) -> bool:
    """Wait until the robot's clock reads `due_s`; True if a stop came first. The robot's clock runs
    at most as fast as this machine's, so waiting what is left of it never overshoots."""
    while True:
        left = due_s - arm.clock_s()
        if left <= 0:
            return False
        if arm.stop_requested.wait(left):
            return True


def _stopped(arm: FrankyArm, report: dict[str, Any]) -> None:
    """A stop ended the chunk: when it went out, and how long the arm took to come to rest from its speed then."""
    report["stopped"] = "stopped"
    stop: dict[str, Any] = {"sent_s": arm.last_stop_sent_s}
    try:
        stopped_at = arm.clock_s()
        stop["speed_rad_s"] = round(max(abs(v) for v in arm.state().joint_velocities), 4)
        deadline = time.monotonic() + REST_TIMEOUT_S
        while time.monotonic() < deadline:
            if at_rest(arm.state().joint_velocities):
                stop["rest_after_s"] = round(arm.clock_s() - stopped_at, 4)
                break
            time.sleep(0.001)
    except RuntimeFault as exc:
        stop["error"] = str(exc)
    report["stop"] = stop


def _shaped(arm: FrankyArm, action: np.ndarray, q: np.ndarray, action_space: str, period_s: float, index: int):
    """The step an action asks for from joints `q`, shaped to the arm's velocity limits."""
    if action_space == "joint_velocity":
        check_action(arm.envelope, action, index, droid.FAR_OVER_UNITS)
    return shape_step(arm.envelope, q, droid.joint_target(action, q, action_space), period_s)


def _check_ahead(arm: FrankyArm, joints: Sequence[float], velocities: Sequence[float], chunk: np.ndarray,
                 action_space: str, period_s: float, first_step: int, clear: list[KeepClear]) -> None:
    """Each step of the chunk as it would run if every shaped target were reached on time."""
    q, dq = np.asarray(joints, dtype=float), np.asarray(velocities, dtype=float)
    for k, action in enumerate(chunk):
        step = _shaped(arm, action, q, action_space, period_s, first_step + k)
        check_step(arm.envelope, q, dq, step, period_s, first_step + k, clear, arm.step_brake)
        q, dq = step.target, step.velocity


def _measured(arm: FrankyArm) -> list[float] | None:
    try:
        return [round(v, 6) for v in arm.state().joints]
    except RuntimeFault:
        return None
