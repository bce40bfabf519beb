"""How a motion tool runs, for one arm or several at once: check, approve, start, stop on cancel, wait.

Checks happen first (the safety envelope raises MotionRefused naming limit, value and waypoint:
target and path of every arm, and, with several arms, the distance between them), then the
operator approval if configured, and only then is anything sent to franky. A cancelled call
stops every arm it started from the cancelling thread, via `ctx.on_cancel`.

Results are measured: once the arm is at rest, `reached` compares the pose computed from the
measured joints with the target (tolerances from the safety file) and, when it is false, says by
how much and the likely cause.

A motion franky's own trajectory generator gives up on halfway (TrajectoryFailure: Ruckig found no
trajectory from the state franky extrapolated after a late control step, seen on franky-sim on a
busy machine, about one approach in ten) is planned again to the same target from where the arms
stopped, up to twice: recovered, checked by the envelope and the arm clearance anew, under the approval
already given, and said in run.log and in the call's progress. A third failure is the call's error.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np

from robots.franka.approval import approve
from robots.franka.arm_clearance import check_arm_clearance
from robots.franka.hardware.franky_arm import FrankyArm
from robots.franka.hardware.franky_gripper import FrankyGripper
from robots.franka.runtime import FrankaRuntime
from rpent.runtime.arm import RuntimeFault, TrajectoryFailure, stop_quietly
from rpent.runtime.types import MotionOutcome, Pose, quat_from_rpy
from rpent.tools import ToolContext

log = logging.getLogger(__name__)

# Generous: the simulator may run at half real time on a busy machine.
MOTION_TIMEOUT_S = 60.0
GRIPPER_TIMEOUT_S = 30.0
# Plans again after a trajectory-generator failure (module docstring). Twice: two episodes at once on 2
# cores failed a second plan too (the eval sweep's pick); more would hide a real problem.
TRAJECTORY_RETRIES = 2


@dataclass(frozen=True)
class PlannedMotion:
    """A checked motion of one arm, not yet sent: its target and the joint path it was checked along."""

    arm: FrankyArm
    description: str
    launch: Callable[[], None]
    path: np.ndarray
    # The same absolute target checked again from the arm's state then (an offset is not offset twice).
    replan: Callable[[], PlannedMotion]
    target: Pose | None = None
    joints: tuple[float, ...] | None = None


def plan_pose(arm: FrankyArm, target: Pose, speed_factor: float | None) -> PlannedMotion:
    arm.envelope.speed_factor(speed_factor)
    p = [round(c, 4) for c in target.position]
    return _to_pose(arm, f"move {arm.name} to {p}", target, speed_factor)


def _to_pose(arm: FrankyArm, description: str, target: Pose, speed_factor: float | None) -> PlannedMotion:
    """A Cartesian motion to `target`, its path checked from the arm's state now."""
    path = np.asarray(arm.cartesian_path([target]), dtype=float)
    return PlannedMotion(
        arm, description, lambda: arm.start_cartesian([target], speed_factor), path,
        lambda: _to_pose(arm, description, target, speed_factor), target,
    )


def plan_offset(
    arm: FrankyArm, translation_m: Sequence[float], rpy_rad: Sequence[float], speed_factor: float | None
) -> PlannedMotion:
    arm.envelope.speed_factor(speed_factor)
    target = arm.relative_target(translation_m, quat_from_rpy(*rpy_rad))
    d = [round(c, 4) for c in translation_m]
    return _to_pose(arm, f"move {arm.name} by {d}", target, speed_factor)


def plan_joints(arm: FrankyArm, joints: Sequence[float], speed_factor: float | None, what: str = "joints") -> PlannedMotion:
    arm.envelope.speed_factor(speed_factor)
    path = np.asarray(arm.joint_path([joints]), dtype=float)
    q = tuple(float(v) for v in joints)
    return PlannedMotion(
        arm, f"move {arm.name} {what} to {[round(v, 3) for v in q]}",
        lambda: arm.start_joints([q], speed_factor), path,
        lambda: plan_joints(arm, q, speed_factor, what), joints=q,
    )


def check_clearance(runtime: FrankaRuntime, plans: Sequence[PlannedMotion]) -> None:
    """With several arms, the moving ones keep their distance from each other and from those standing."""
    if len(runtime.arms) < 2:
        return
    moving = {p.arm.name: p for p in plans}
    paths = [
        (arm.envelope, moving[name].path if name in moving else np.asarray([arm.state().joints], dtype=float))
        for name, arm in runtime.arms.items()
    ]
    check_arm_clearance(paths)


def target_pose(
    arm: FrankyArm,
    position: Sequence[float],
    rpy: Sequence[float | None],
    quaternion_xyzw: Sequence[float] | None,
) -> Pose:
    """Absolute target; orientation from a quaternion, from (partial) rpy, or kept as it is."""
    given_rpy = any(a is not None for a in rpy)
    if quaternion_xyzw is not None and given_rpy:
        raise ValueError("orientation: give either roll/pitch/yaw or quaternion_xyzw, not both")
    if quaternion_xyzw is not None:
        return Pose(tuple(position), tuple(quaternion_xyzw))  # type: ignore[arg-type]
    current = arm.state().pose
    if not given_rpy:
        return Pose(tuple(position), current.quaternion)  # type: ignore[arg-type]
    filled = [c if a is None else a for a, c in zip(rpy, current.rpy, strict=True)]
    return Pose.from_rpy(position, filled)


@contextmanager
def filming(ctx: ToolContext[FrankaRuntime]) -> Iterator[None]:
    """Record every camera into the episode video while a motion runs, at `runtime.video_fps`
    frames a second: one tiled, labelled frame of all cameras each time (rpent.record.video_tiles).

    The cameras are captured together on a side thread (each renders or grabs on its own), so the
    motion's wait (and its cancellation) never waits for a picture. Frames are due at fixed times;
    one that is late (a slow render) is taken at once and the next is due a period later.
    """
    cameras = list(ctx.robot.cameras)
    fps = getattr(ctx.robot, "video_fps", 0.0)
    if not cameras or fps <= 0:
        yield
        return
    stop = threading.Event()
    pool = ThreadPoolExecutor(max_workers=len(cameras), thread_name_prefix="rpent-filming")

    def sample() -> None:
        due = time.monotonic()
        while not stop.is_set():
            try:
                tap = getattr(ctx.robot, "frame_tap", None)
                if tap is not None:  # the record's stream renders the cameras already
                    views = tap()
                    if views:
                        ctx.record_frame(views)
                else:
                    pictures = [pool.submit(camera.capture) for camera in cameras]
                    ctx.record_frame({camera.name: picture.result()
                                      for camera, picture in zip(cameras, pictures, strict=True)})
            except Exception:  # a camera hiccup must not disturb the motion
                return
            due = max(due + 1.0 / fps, time.monotonic())
            stop.wait(max(0.0, due - time.monotonic()))

    thread = threading.Thread(target=sample, name="rpent-filming", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=2.0)
        pool.shutdown(wait=False)


def execute(ctx: ToolContext[FrankaRuntime], plans: Sequence[PlannedMotion]) -> list[dict[str, Any]]:
    """Approve, start all planned motions, stop them all on cancel, wait; one result dict per arm."""
    check_clearance(ctx.robot, plans)
    approve(ctx, [p.arm for p in plans], "; ".join(p.description for p in plans))
    for attempt in range(1 + TRAJECTORY_RETRIES):
        try:
            started, outcomes = _run(ctx, plans)
            break
        except TrajectoryFailure as exc:
            if attempt == TRAJECTORY_RETRIES:
                raise
            plans = _plan_again(ctx, plans, exc)
    ctx.check_cancelled()
    results = []
    for plan, outcome in zip(started, outcomes, strict=True):
        if outcome.timed_out:
            raise RuntimeFault(f"{plan.arm.name}: target not reached within {MOTION_TIMEOUT_S:.0f} s; the arm was stopped")
        results.append(_motion_result(plan, outcome))
    return results


def _run(ctx: ToolContext[FrankaRuntime], plans: Sequence[PlannedMotion]) -> tuple[list[PlannedMotion], list[MotionOutcome]]:
    """Start every plan, film while they run, wait for each; any failure stops every arm started."""
    ctx.check_cancelled()
    started: list[PlannedMotion] = []
    unhooks: list[Callable[[], None]] = []
    outcomes: list[MotionOutcome] = []
    try:
        for plan in plans:
            plan.launch()
            started.append(plan)
            # Hooked after launch: if the call is already cancelled the hook runs now and stops it.
            unhooks.append(ctx.on_cancel(lambda arm=plan.arm: stop_quietly(arm)))
        ctx.report("moving", "; ".join(p.description for p in plans))
        with filming(ctx):
            for plan in started:
                outcomes.append(plan.arm.wait(timeout_s=MOTION_TIMEOUT_S))
    except BaseException:
        for plan in started:
            stop_quietly(plan.arm)  # one arm failed: the other must not keep going on its own
        raise
    finally:
        for unhook in unhooks:
            unhook()
    return started, outcomes


def _plan_again(ctx: ToolContext[FrankaRuntime], plans: Sequence[PlannedMotion], failure: TrajectoryFailure) -> list[PlannedMotion]:
    """The same targets from where the arms came to rest, recovered and checked anew (MotionRefused
    if the envelope or the clearance now refuses one)."""
    ctx.check_cancelled()
    for plan in plans:
        plan.arm.settled_state()
        plan.arm.recover()
    again = [plan.replan() for plan in plans]
    check_clearance(ctx.robot, again)
    ctx.robot.replans += 1
    note = f"{failure}; planning the same target again from where the arm stopped (checked anew)"
    log.warning("%s", note)
    ctx.report("replanning", note)
    return again


def _motion_result(plan: PlannedMotion, outcome: MotionOutcome) -> dict[str, Any]:
    """What the motion really reached, measured once the arm is at rest."""
    arm, limits = plan.arm, plan.arm.envelope.limits
    state = arm.settled_state()
    target = plan.target if plan.target is not None else arm.envelope.tcp_pose(plan.joints)
    position_error = state.pose.distance_to(target)
    angle_error = math.degrees(state.pose.angle_to(target))
    reached = (
        outcome.finished and position_error <= limits.reach_tolerance_m and angle_error <= limits.reach_tolerance_deg
    )
    result: dict[str, Any] = {
        "arm": arm.name,
        "reached": reached,
        "target": target.to_dict(),
        "pose": state.pose.to_dict(),
        "position_error_m": round(position_error, 5),
        "orientation_error_deg": round(angle_error, 3),
    }
    if plan.joints is not None:
        result["joint_error_rad"] = round(max(abs(q - t) for q, t in zip(state.joints, plan.joints, strict=True)), 5)
    result["cause"] = None if reached else _likely_cause(arm, outcome, state.joints)
    return result


def _likely_cause(arm: FrankyArm, outcome: MotionOutcome, joints: Sequence[float]) -> str:
    if outcome.stopped:
        return "stopped: the motion was stopped before it ended"
    limits = arm.envelope.limits
    for i, (q, lo, hi) in enumerate(zip(joints, limits.joint_lower_rad, limits.joint_upper_rad, strict=False)):
        if q < lo + limits.joint_margin_rad / 2 or q > hi - limits.joint_margin_rad / 2:
            return f"limit: joint {i + 1} ended at {q:.3f} rad, at its limit [{lo}, {hi}]"
    return "contact: the motion ended away from its target (blocked by an object, the table, or a collision reflex)"


def run_gripper(
    ctx: ToolContext[FrankaRuntime],
    gripper: FrankyGripper,
    description: str,
    command: Callable[[], MotionOutcome],
    check: Callable[[], None],
    arm: FrankyArm,
) -> dict[str, Any]:
    """Check, approve, run a gripper command with stop-on-cancel; the gripper's state after it."""
    check()
    approve(ctx, [arm], description)
    unhook = ctx.on_cancel(lambda: stop_quietly(gripper))
    try:
        with filming(ctx):
            outcome = command()
    finally:
        unhook()
    ctx.check_cancelled()
    if outcome.timed_out:
        raise RuntimeFault(f"{gripper.name}: {outcome.detail}")
    state = gripper.state()
    result: dict[str, Any] = {"arm": arm.name, "width_m": round(state.width_m, 5), "grasped": state.grasped}
    return result
