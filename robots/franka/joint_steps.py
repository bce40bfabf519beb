"""Stream a chunk of policy actions to one arm at the control rate, every step checked before franky sees it.

This loop runs where the arm's franky connection is (the toolkit's process, or the arm node with
runtime_mode ros), so no step crosses a process or a ROS hop. Each step reads the measured
joints, turns the action into a joint target (robots.franka.droid), checks it
(robots.franka.step_check) and only then commands the arm, replacing the previous step's motion:

- `motion: velocity`: a joint velocity motion at (target - measured) / period, held one period;
- `motion: position`: an asynchronous joint motion to the target.

Before the first step the whole chunk is checked as the measured joints predict it (each target
reached), so a chunk heading out of the envelope is refused before the arm moves at all; the step
check with the measured joints still guards every step. A refusal stops the arm. With `hold`, a
velocity chunk ends with a zero velocity, so the arm waits for the next inference instead of running
on; every step's check covers the path on to where the arm comes to rest if no next step follows
(v^2 / 2a past the target, with the deceleration franky stops the arm with).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from robots.franka import droid
from robots.franka.step_check import KeepClear, StepRefused, check_step
from rpent.runtime.arm import RuntimeFault

if TYPE_CHECKING:
    import threading

    from robots.franka.franky_arm import FrankyArm

MOTIONS = ("velocity", "position")


def run(
    arm: FrankyArm,
    actions: Sequence[Sequence[float]],
    *,
    action_space: str = "joint_velocity",
    motion: str = "velocity",
    period_s: float = 1.0 / droid.CONTROL_HZ,
    first_step: int = 0,
    hold: bool = True,
    keep_clear: Sequence[KeepClear | Mapping[str, Any]] = (),
    cancel: threading.Event | None = None,
) -> dict[str, Any]:
    """Run `actions` (n x 7 joint values; the gripper is not the arm's); returns what happened.

    The result: `steps` run, `stopped` (None when the chunk ran out; "stopped", "refused",
    "reflex" or "fault"), `refused` (limit, value, rule, step), `error`, the measured `joints_rad`
    at the end, `step_times_s` (monotonic) and `tracking_error_rad` (per step, the largest joint
    gap between the target and the measured joints one period later).
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
    report: dict[str, Any] = {"steps": 0, "stopped": None, "refused": None, "error": None,
                              "step_times_s": [], "tracking_error_rad": []}
    arm.stop_requested.clear()
    try:
        state = arm.state()
        report["_q"] = state.joints
        _check_ahead(arm, state.joints, state.joint_velocities, chunk, action_space, period_s, first_step, clear)
        target = _stream(arm, chunk, report, action_space, motion, period_s, first_step, clear, cancel)
        if target is not None and hold and motion == "velocity" and report["stopped"] is None:
            arm.stream_joint_velocity(np.zeros(7), 0.001)  # franky cannot switch motion types while one runs
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
    start = time.monotonic()
    target: np.ndarray | None = None
    for k in range(len(chunk) + 1):
        if k > 0 and arm.stop_requested.wait(max(0.0, start + k * period_s - time.monotonic())):
            report["stopped"] = "stopped"
            return target
        if (cancel is not None and cancel.is_set()) or arm.stop_requested.is_set():
            arm.stop_quietly()
            report["stopped"] = "stopped"
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
        step_target = droid.joint_target(chunk[k], q, action_space)
        check_step(arm.envelope, q, state.joint_velocities, step_target, period_s, first_step + k, clear,
                   arm.stopping_rad_s2)
        if motion == "velocity":
            arm.stream_joint_velocity((step_target - q) / period_s, period_s)
        else:
            arm.stream_joint_target(step_target)
        report["step_times_s"].append(time.monotonic())
        report["steps"] += 1
        target = step_target
    return target


def _check_ahead(arm: FrankyArm, joints: Sequence[float], velocities: Sequence[float], chunk: np.ndarray,
                 action_space: str, period_s: float, first_step: int, clear: list[KeepClear]) -> None:
    """Each step of the chunk as it would run if every target were reached on time."""
    q, dq = np.asarray(joints, dtype=float), np.asarray(velocities, dtype=float)
    for k, action in enumerate(chunk):
        target = droid.joint_target(action, q, action_space)
        check_step(arm.envelope, q, dq, target, period_s, first_step + k, clear, arm.stopping_rad_s2)
        q, dq = target, (target - q) / period_s


def _measured(arm: FrankyArm) -> list[float] | None:
    try:
        return [round(v, 6) for v in arm.state().joints]
    except RuntimeFault:
        return None
