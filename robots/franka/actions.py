"""What the Franka tools do, written once for one arm or for a named arm of several.

The tool modules (robots/franka/tools.py, robots/dual_franka/tools.py) only declare parameters
and docstrings for the model and call these.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from typing import Annotated, Any, Literal

import numpy as np
from pydantic import Field

from robots.franka.approval import approve
from robots.franka.back_projection import NoDepth, point_in_camera, robust_depth, to_frame
from robots.franka.camera_mount import base_frame_name
from robots.franka.frame_store import FrameStore
from robots.franka.motion import (
    GRIPPER_TIMEOUT_S,
    execute,
    plan_joints,
    plan_offset,
    plan_pose,
    run_gripper,
    target_pose,
)
from robots.franka.policy.step_safety import KeepClear
from robots.franka.runtime import FrankaRuntime
from rpent.runtime.camera import capture_frame
from rpent.tools import ToolContext, ToolResult
from rpent.tools.images import encode_png

log = logging.getLogger(__name__)

# Schema bounds are sanity limits only; the configured safety envelope is usually tighter and
# is what refuses a motion (with the limit and the value).
Coordinate = Annotated[float, Field(ge=-1.0, le=1.0)]
Offset = Annotated[float, Field(ge=-0.2, le=0.2)]
Angle = Annotated[float, Field(ge=-3.1416, le=3.1416)]
AngleStep = Annotated[float, Field(ge=-1.0, le=1.0)]
SpeedFactor = Annotated[float, Field(gt=0.0, le=1.0)]
Quaternion = Annotated[list[float], Field(min_length=4, max_length=4)]
Joints = Annotated[list[float], Field(min_length=7, max_length=7)]
Width = Annotated[float, Field(ge=0.0, le=0.08)]
Force = Annotated[float, Field(gt=0.0, le=140.0)]
CameraName = Annotated[str, Field(min_length=1, max_length=64)]
PixelIndex = Annotated[int, Field(ge=0, le=8191)]
Step = Annotated[int, Field(ge=-1)]
Radius = Annotated[int, Field(ge=0, le=40)]
Instruction = Annotated[str, Field(min_length=1, max_length=2000)]
PolicySteps = Annotated[int, Field(ge=1, le=10000)]
StopConditions = list[Literal["gripper_closed", "arm_at_rest"]]
PolicySeconds = Annotated[float, Field(gt=0.0, le=3600.0)]

# Where FrankaToolkit keeps the run's FrameStore in the toolkit state.
FRAMES_STATE_KEY = "franka.frames"

Ctx = ToolContext[FrankaRuntime]


def move_to(
    ctx: Ctx,
    arm_name: str | None,
    position: Sequence[float],
    rpy: Sequence[float | None],
    quaternion_xyzw: Sequence[float] | None,
    speed_factor: float | None,
) -> dict[str, Any]:
    arm = ctx.robot.arm(arm_name)
    target = target_pose(arm, position, rpy, quaternion_xyzw)
    return execute(ctx, [plan_pose(arm, target, speed_factor)])[0]


def move_by(
    ctx: Ctx,
    arm_name: str | None,
    translation_m: Sequence[float],
    rpy_rad: Sequence[float],
    speed_factor: float | None,
) -> dict[str, Any]:
    arm = ctx.robot.arm(arm_name)
    return execute(ctx, [plan_offset(arm, translation_m, rpy_rad, speed_factor)])[0]


def move_joints(ctx: Ctx, arm_name: str | None, joints_rad: Sequence[float], speed_factor: float | None) -> dict[str, Any]:
    arm = ctx.robot.arm(arm_name)
    result = execute(ctx, [plan_joints(arm, joints_rad, speed_factor)])[0]
    result["joints_rad"] = [round(q, 5) for q in arm.state().joints]
    return result


def home(ctx: Ctx, arm_names: Sequence[str], speed_factor: float | None) -> dict[str, Any]:
    plans = [
        plan_joints(ctx.robot.arm(n), ctx.robot.arm_configs[n].home_joints_rad, speed_factor, what="home joints")
        for n in arm_names
    ]
    return {"arms": execute(ctx, plans)}


def move_gripper(ctx: Ctx, arm_name: str | None, width_m: float) -> dict[str, Any]:
    arm, gripper = ctx.robot.arm(arm_name), ctx.robot.gripper(arm_name)
    return run_gripper(
        ctx, gripper, f"move {gripper.name} to {width_m:.4f} m",
        lambda: gripper.move(width_m, timeout_s=GRIPPER_TIMEOUT_S),
        lambda: gripper.envelope.check_gripper(width_m=width_m), arm,
    )


def open_gripper(ctx: Ctx, arm_name: str | None) -> dict[str, Any]:
    arm, gripper = ctx.robot.arm(arm_name), ctx.robot.gripper(arm_name)
    return run_gripper(
        ctx, gripper, f"open {gripper.name}", lambda: gripper.open(timeout_s=GRIPPER_TIMEOUT_S), lambda: None, arm
    )


def grasp(ctx: Ctx, arm_name: str | None, width_m: float, force_n: float) -> dict[str, Any]:
    arm, gripper = ctx.robot.arm(arm_name), ctx.robot.gripper(arm_name)
    return run_gripper(
        ctx, gripper, f"grasp with {gripper.name} at {force_n:.0f} N",
        lambda: gripper.grasp(width_m, force_n, timeout_s=GRIPPER_TIMEOUT_S),
        lambda: gripper.envelope.check_gripper(width_m=width_m, force_n=force_n), arm,
    )


def arm_states(runtime: FrankaRuntime) -> dict[str, Any]:
    """Pose, joints and gripper of every arm (what get_state and every observation report)."""
    arms: dict[str, Any] = {}
    for name, arm in runtime.arms.items():
        entry = arm.state().to_dict()
        if name in runtime.grippers:
            entry["gripper"] = runtime.grippers[name].state().to_dict()
        arms[name] = entry
    return arms


def frame_store(state: dict[str, Any]) -> FrameStore:
    """The run's store of observation frames (FrankaToolkit puts one there; a bare context gets one)."""
    store = state.get(FRAMES_STATE_KEY)
    if store is None:
        store = state.setdefault(FRAMES_STATE_KEY, FrameStore())
    return store


def observe_cameras(
    runtime: FrankaRuntime, store: FrameStore, step: int, tool: str
) -> tuple[list[dict[str, Any]], dict[str, bytes]]:
    """One frame per camera, in the runtime's camera order: its description (name, size, depth,
    back_project, step) and {camera name: the PNG of exactly those pixels}; depth and pose kept in `store`."""
    frames = [capture_frame(cam) for cam in runtime.cameras]
    pngs = {frame.camera: encode_png(frame.rgb) for frame in frames}
    return store.record(step, tool, frames), pngs


def capture_images(ctx: Ctx) -> ToolResult:
    cameras, pngs = observe_cameras(ctx.robot, frame_store(ctx.state), ctx.call_id, ctx.tool_name)
    return ToolResult(data={"cameras": cameras}, images=list(pngs.values()), image_names=list(pngs))


class BackProjectError(ValueError):
    """back_project cannot place this pixel; the message names why."""


def back_project(ctx: Ctx, arm_name: str | None, camera: str, row: int, col: int, step: int, radius: int) -> dict[str, Any]:
    """The base-frame point under pixel (row, col) of the image `camera` gave at `step`."""
    arm = ctx.robot.arm(arm_name).name  # the frame the point is given in
    known = [cam.name for cam in ctx.robot.cameras]
    if camera not in known:
        raise BackProjectError(f"camera: unknown camera {camera!r}; cameras: {known}")
    try:
        frame = frame_store(ctx.state).get(camera, step)
    except KeyError as exc:
        raise BackProjectError(exc.args[0]) from None
    where = f"camera {camera!r} at step {frame.step}"
    if frame.depth_m is None:
        raise BackProjectError(f"{where}: no depth for this camera (colour only), so its pixels cannot be placed; use a depth camera's image")
    if not (0 <= row < frame.height and 0 <= col < frame.width):
        raise BackProjectError(
            f"pixel (row {row}, col {col}) is outside the {frame.width} x {frame.height} image of {where}"
            f" (row 0..{frame.height - 1}, col 0..{frame.width - 1})"
        )
    if frame.intrinsics is None or frame.T_base_camera is None:
        missing = "intrinsics" if frame.intrinsics is None else "pose (T_base_camera or T_flange_camera in the config)"
        raise BackProjectError(f"{where}: uncalibrated camera, its {missing} is unknown (run rpent calibrate)")
    try:
        estimate = robust_depth(frame.depth_m, row, col, radius)
    except NoDepth:
        raise BackProjectError(
            f"{where}: no valid depth within {radius} pixels of (row {row}, col {col}); try a larger radius or a pixel on a surface"
        ) from None
    point = to_frame(frame.T_base_camera, point_in_camera(frame.intrinsics, row, col, estimate.depth_m))
    point = point + _frame_offset(ctx.robot, frame.base_frame, arm)
    return {
        "xyz_m": [round(float(v), 4) for v in point],
        "frame": base_frame_name(arm),
        "camera": camera,
        "step": frame.step,
        "depth_m": round(estimate.depth_m, 4),
        "calibrated": True,
    }


def _frame_offset(runtime: FrankaRuntime, base_frame: str, arm: str) -> np.ndarray:
    """Add to a point in `base_frame` (some arm's base) to have it in `arm`'s base (arms stand unrotated)."""
    if base_frame == base_frame_name(arm):
        return np.zeros(3)
    source = next((n for n in runtime.arm_configs if base_frame_name(n) == base_frame), None)
    if source is None:
        raise BackProjectError(f"the camera's pose is in frame {base_frame!r}, which is no arm's base frame")
    return np.asarray(runtime.arm_configs[source].base_xyz_m, float) - np.asarray(runtime.arm_configs[arm].base_xyz_m, float)


def recover(ctx: Ctx) -> dict[str, Any]:
    return {"recovered": {name: arm.recover() for name, arm in ctx.robot.arms.items()}}


# A policy run that ended on one of these is a failed call (the result still says where the arm is).
_POLICY_FAILURES = ("refused", "policy_error", "reflex", "fault")


def run_policy(ctx: Ctx, arm_name: str | None, instruction: str, max_steps: int, stop_when: Sequence[str],
               max_duration_s: float) -> ToolResult:
    """Let the arm's VLA policy drive it (robots.franka.policy.loop), approved once for the whole run."""
    runtime = ctx.robot
    arm = runtime.arm(arm_name)
    policy = runtime.policy(arm.name)
    # The other arms stand still while this one runs: its every step keeps clear of where they are.
    keep_clear = [KeepClear.of(other.envelope, other.state().joints, arm.envelope).to_dict()
                  for name, other in runtime.arms.items() if name != arm.name]
    approve(ctx, [arm], f"run the VLA policy on {arm.name} for up to {max_steps} steps ({max_duration_s:g} s): "
                        f"{instruction!r}")
    ctx.check_cancelled()
    cancel = threading.Event()
    cancelled_s: list[float] = []

    def stop() -> None:
        cancelled_s.append(time.perf_counter())
        cancel.set()
        try:  # straight to the arm (under ROS its node), before the policy's node hears of it
            arm.stop()
        except Exception as exc:
            log.warning("%s: stop on cancel failed: %s", arm.name, exc)
        policy.stop()

    unhook = ctx.on_cancel(stop)
    try:
        ctx.report("running", f"policy on {arm.name}: {instruction}")
        result = policy.run(instruction, max_steps, list(stop_when), max_duration_s, keep_clear=keep_clear,
                            cancel=cancel, on_frame=ctx.record_frame)
    finally:
        unhook()
    if cancelled_s:
        _time_the_stop(result.setdefault("stop", {}), cancelled_s[0])
    reason = result["stopped"]
    if reason not in _POLICY_FAILURES:
        return ToolResult(data=result)
    if reason == "refused":
        refused = result["refused"]
        error = (f"refused at step {refused['step']}: {refused['limit']} = {refused['value']} violates {refused['rule']}; "
                 f"the step was not sent and the arm was stopped")
    else:
        error = (f"{reason}: the policy run ended after {result['steps']} steps ({result['inferences']} inferences) "
                 f"with the arm stopped: {result.get('error')}")
    return ToolResult(data=result, error=error)


def _time_the_stop(stop: dict[str, Any], cancelled_s: float) -> None:
    """When the cancel came and how long the arm's stop took after it (the arm may be in another process
    on this machine: perf_counter is the machine's monotonic clock)."""
    stop["cancel_s"] = cancelled_s
    if stop.get("sent_s") is not None:
        stop["latency_ms"] = round((stop["sent_s"] - cancelled_s) * 1000, 3)
