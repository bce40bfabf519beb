"""What the Franka tools do, written once for one arm or for a named arm of several.

The tool modules (robots/franka/tools.py, robots/dual_franka/tools.py) only declare parameters
and docstrings for the model and call these.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any

from pydantic import Field

from robots.franka.motion import (
    GRIPPER_TIMEOUT_S,
    execute,
    plan_joints,
    plan_offset,
    plan_pose,
    run_gripper,
    target_pose,
)
from robots.franka.runtime import FrankaRuntime
from rpent.tools import ToolContext, ToolResult
from rpent.tools.images import encode_png

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


def capture_pngs(runtime: FrankaRuntime) -> tuple[list[str], list[bytes]]:
    """One PNG per camera, in the runtime's camera order."""
    names, pngs = [], []
    for cam in runtime.cameras:
        pngs.append(encode_png(cam.capture()))
        names.append(cam.name)
    return names, pngs


def capture_images(ctx: Ctx) -> ToolResult:
    names, pngs = capture_pngs(ctx.robot)
    return ToolResult(data={"cameras": names}, images=pngs)


def recover(ctx: Ctx) -> dict[str, Any]:
    return {"recovered": {name: arm.recover() for name, arm in ctx.robot.arms.items()}}


def stop(ctx: Ctx) -> dict[str, Any]:
    ctx.robot.stop_all()  # raises naming every device that did not take the stop
    return {"stopped": sorted(ctx.robot.arms)}
