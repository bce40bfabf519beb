"""How a motion tool runs, for one arm or several at once: check, approve, start, stop on cancel, wait.

Checks happen first (the safety envelope raises MotionRefused naming limit and value), then the
operator approval if configured, and only then is anything sent to franky. A cancelled call
stops every arm it started from the cancelling thread, via `ctx.on_cancel`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from robots.franka.approval import approve
from robots.franka.franky_arm import FrankyArm
from robots.franka.franky_gripper import FrankyGripper
from robots.franka.runtime import FrankaRuntime
from rpent.runtime.arm import RuntimeFault
from rpent.runtime.types import MotionOutcome, Pose, quat_from_rpy
from rpent.tools import ToolContext

# Generous: the simulator may run at half real time on a busy machine.
MOTION_TIMEOUT_S = 60.0
GRIPPER_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class PlannedMotion:
    """A checked motion of one arm, not yet sent."""

    arm: FrankyArm
    description: str
    launch: Callable[[], None]
    target: Pose | None = None


def plan_pose(arm: FrankyArm, target: Pose, speed_factor: float | None) -> PlannedMotion:
    arm.check_cartesian([target], speed_factor)
    p = [round(c, 4) for c in target.position]
    return PlannedMotion(arm, f"move {arm.name} to {p}", lambda: arm.start_cartesian([target], speed_factor), target)


def plan_offset(
    arm: FrankyArm, translation_m: Sequence[float], rpy_rad: Sequence[float], speed_factor: float | None
) -> PlannedMotion:
    arm.envelope.speed_factor(speed_factor)
    target = arm.relative_target(translation_m, quat_from_rpy(*rpy_rad))
    d = [round(c, 4) for c in translation_m]
    return PlannedMotion(arm, f"move {arm.name} by {d}", lambda: arm.start_cartesian([target], speed_factor), target)


def plan_joints(arm: FrankyArm, joints: Sequence[float], speed_factor: float | None, what: str = "joints") -> PlannedMotion:
    arm.check_joints([joints], speed_factor)
    q = [round(float(v), 3) for v in joints]
    return PlannedMotion(arm, f"move {arm.name} {what} to {q}", lambda: arm.start_joints([joints], speed_factor))


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
    """Record the first camera into the episode video while a motion runs, at `runtime.video_fps`.

    Frames are rendered on a side thread so the motion's wait (and its cancellation) never waits
    for a render.
    """
    cameras = ctx.robot.cameras
    fps = getattr(ctx.robot, "video_fps", 0.0)
    if not cameras or fps <= 0:
        yield
        return
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            try:
                ctx.record_frame(cameras[0].capture())
            except Exception:  # a camera hiccup must not disturb the motion
                return
            stop.wait(1.0 / fps)

    thread = threading.Thread(target=sample, name="rpent-filming", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=2.0)


def execute(ctx: ToolContext[FrankaRuntime], plans: Sequence[PlannedMotion]) -> list[dict[str, Any]]:
    """Approve, start all planned motions, stop them all on cancel, wait; one result dict per arm."""
    approve(ctx, [p.arm for p in plans], "; ".join(p.description for p in plans))
    ctx.check_cancelled()
    started: list[PlannedMotion] = []
    unhooks: list[Callable[[], None]] = []
    outcomes: list[MotionOutcome] = []
    try:
        for plan in plans:
            plan.launch()
            started.append(plan)
            # Hooked after launch: if the call is already cancelled the hook runs now and stops it.
            unhooks.append(ctx.on_cancel(plan.arm.stop))
        ctx.report("moving", "; ".join(p.description for p in plans))
        with filming(ctx):
            for plan in started:
                outcomes.append(plan.arm.wait(timeout_s=MOTION_TIMEOUT_S))
    except BaseException:
        for plan in started:
            plan.arm.stop()  # one arm failed: the other must not keep going on its own
        raise
    finally:
        for unhook in unhooks:
            unhook()
    ctx.check_cancelled()
    results = []
    for plan, outcome in zip(started, outcomes, strict=True):
        if outcome.timed_out:
            raise RuntimeFault(f"{plan.arm.name}: target not reached within {MOTION_TIMEOUT_S:.0f} s; the arm was stopped")
        results.append(_motion_result(plan, outcome))
    return results


def _motion_result(plan: PlannedMotion, outcome: MotionOutcome) -> dict[str, Any]:
    result: dict[str, Any] = {"arm": plan.arm.name, "reached": outcome.finished}
    if plan.target is not None:
        result["target"] = plan.target.to_dict()
        reached = plan.arm.state().pose
        result["position_error_m"] = round(reached.distance_to(plan.target), 5)
    return result


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
    unhook = ctx.on_cancel(gripper.stop)
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
