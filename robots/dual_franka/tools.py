"""What the model may do with two Franka arms, "left" and "right" (each pose in its own base frame)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field

from robots.franka import actions, tools
from robots.franka.actions import (
    Angle,
    AngleStep,
    CameraName,
    Coordinate,
    Force,
    Instruction,
    Joints,
    Offset,
    PixelIndex,
    PolicySeconds,
    PolicySteps,
    Quaternion,
    Radius,
    SpeedFactor,
    Step,
    StopConditions,
    Width,
)
from robots.franka.motion import execute, plan_offset, plan_pose, target_pose
from robots.franka.runtime import FrankaRuntime
from rpent.tools import ToolContext, ToolResult, readonly, tool

_ARM_ALIASES = {"l": "left", "left": "left", "r": "right", "right": "right"}


def _normalise_arm(value: Any) -> Any:
    if isinstance(value, str):
        return _ARM_ALIASES.get(value.strip().lower(), value)
    return value


# What _normalise_arm maps to an arm (Python's \s is the whitespace str.strip removes), published
# so that the schema admits exactly what the tool takes.
_ARM_SPELLING = Annotated[str, Field(pattern=r"^\s*(?:[Ll](?:[Ee][Ff][Tt])?|[Rr](?:[Ii][Gg][Hh][Tt])?)\s*$")]

ArmName = Annotated[
    Literal["left", "right"],
    BeforeValidator(_normalise_arm, json_schema_input_type=Literal["left", "right"] | _ARM_SPELLING),
    Field(description='Which arm: "left" or "right" (also accepted: "L", "R", any capitalisation).'),
]


@tool(outcome=["reached"])
def move_to(
    arm: ArmName,
    x_m: Coordinate,
    y_m: Coordinate,
    z_m: Coordinate,
    roll_rad: Angle | None = None,
    pitch_rad: Angle | None = None,
    yaw_rad: Angle | None = None,
    quaternion_xyzw: Quaternion | None = None,
    speed_factor: SpeedFactor | None = None,
    *,
    ctx: ToolContext[FrankaRuntime],
) -> dict[str, Any]:
    """Move one arm's gripper (fingertip centre) to a pose in that arm's base frame.

    Each base frame: x forward, y to that robot's left, z up, origin at its foot. Orientation:
    roll/pitch/yaw (missing angles keep their value), a quaternion, or neither to keep it.
    Moves outside the arm's workspace are refused and the arm does not move.

    Args:
        arm: Which arm moves.
        x_m: Target x in metres.
        y_m: Target y in metres.
        z_m: Target z in metres.
        roll_rad: Target roll about x in radians.
        pitch_rad: Target pitch about y in radians.
        yaw_rad: Target yaw about z in radians.
        quaternion_xyzw: Target orientation as a unit quaternion [x, y, z, w] instead of roll/pitch/yaw.
        speed_factor: Fraction of the maximum speed (default from the safety config, capped there).
    """
    return actions.move_to(ctx, arm, (x_m, y_m, z_m), (roll_rad, pitch_rad, yaw_rad), quaternion_xyzw, speed_factor)


@tool(outcome=["reached"])
def move_by(
    arm: ArmName,
    dx_m: Offset = 0.0,
    dy_m: Offset = 0.0,
    dz_m: Offset = 0.0,
    droll_rad: AngleStep = 0.0,
    dpitch_rad: AngleStep = 0.0,
    dyaw_rad: AngleStep = 0.0,
    speed_factor: SpeedFactor | None = None,
    *,
    ctx: ToolContext[FrankaRuntime],
) -> dict[str, Any]:
    """Move one arm's gripper by an offset in that arm's base frame (x forward, y left, z up).

    Args:
        arm: Which arm moves.
        dx_m: Offset along x in metres.
        dy_m: Offset along y in metres.
        dz_m: Offset along z in metres.
        droll_rad: Rotation about the base x axis in radians.
        dpitch_rad: Rotation about the base y axis in radians.
        dyaw_rad: Rotation about the base z axis in radians.
        speed_factor: Fraction of the maximum speed (default from the safety config, capped there).
    """
    return actions.move_by(ctx, arm, (dx_m, dy_m, dz_m), (droll_rad, dpitch_rad, dyaw_rad), speed_factor)


@tool(outcome=["reached"])
def move_both_to(
    left_x_m: Coordinate,
    left_y_m: Coordinate,
    left_z_m: Coordinate,
    right_x_m: Coordinate,
    right_y_m: Coordinate,
    right_z_m: Coordinate,
    speed_factor: SpeedFactor | None = None,
    *,
    ctx: ToolContext[FrankaRuntime],
) -> dict[str, Any]:
    """Move both grippers at the same time, each to a position in its own base frame.

    Orientations stay as they are. If either target is refused, neither arm moves.

    Args:
        left_x_m: Left arm target x in metres.
        left_y_m: Left arm target y in metres.
        left_z_m: Left arm target z in metres.
        right_x_m: Right arm target x in metres.
        right_y_m: Right arm target y in metres.
        right_z_m: Right arm target z in metres.
        speed_factor: Fraction of the maximum speed for both (default from the safety config).
    """
    left, right = ctx.robot.arm("left"), ctx.robot.arm("right")
    plans = [
        plan_pose(left, target_pose(left, (left_x_m, left_y_m, left_z_m), (None, None, None), None), speed_factor),
        plan_pose(right, target_pose(right, (right_x_m, right_y_m, right_z_m), (None, None, None), None), speed_factor),
    ]
    return {"arms": execute(ctx, plans)}


@tool(outcome=["reached"])
def move_both_by(
    dx_m: Offset = 0.0, dy_m: Offset = 0.0, dz_m: Offset = 0.0, speed_factor: SpeedFactor | None = None, *, ctx: ToolContext[FrankaRuntime]
) -> dict[str, Any]:
    """Move both grippers by the same offset at the same time (e.g. to lift an object held by both).

    If either step is refused, neither arm moves.

    Args:
        dx_m: Offset along x in metres.
        dy_m: Offset along y in metres.
        dz_m: Offset along z in metres.
        speed_factor: Fraction of the maximum speed for both (default from the safety config).
    """
    plans = [plan_offset(ctx.robot.arm(n), (dx_m, dy_m, dz_m), (0.0, 0.0, 0.0), speed_factor) for n in ("left", "right")]
    return {"arms": execute(ctx, plans)}


@tool(outcome=["reached"])
def move_joints(arm: ArmName, joints_rad: Joints, speed_factor: SpeedFactor | None = None, *, ctx: ToolContext[FrankaRuntime]) -> dict[str, Any]:
    """Move one arm's seven joints to the given angles (joint 1 at the base first).

    Args:
        arm: Which arm moves.
        joints_rad: Seven joint angles in radians.
        speed_factor: Fraction of the maximum speed (default from the safety config, capped there).
    """
    return actions.move_joints(ctx, arm, joints_rad, speed_factor)


@tool(outcome=["reached"])
def home(arm: ArmName | None = None, speed_factor: SpeedFactor | None = None, *, ctx: ToolContext[FrankaRuntime]) -> dict[str, Any]:
    """Move one arm, or both at once, to the home joint configuration.

    Args:
        arm: Which arm; omit to home both at the same time.
        speed_factor: Fraction of the maximum speed (default from the safety config, capped there).
    """
    return actions.home(ctx, [arm] if arm else ["left", "right"], speed_factor)


@tool
def open_gripper(arm: ArmName, *, ctx: ToolContext[FrankaRuntime]) -> dict[str, Any]:
    """Open one arm's gripper fully (releases whatever it holds).

    Args:
        arm: Which arm's gripper.
    """
    return actions.open_gripper(ctx, arm)


@tool
def move_gripper(arm: ArmName, width_m: Width, *, ctx: ToolContext[FrankaRuntime]) -> dict[str, Any]:
    """Move one arm's gripper fingers to an opening width without gripping force.

    Args:
        arm: Which arm's gripper.
        width_m: Distance between the fingers in metres (0 to 0.08).
    """
    return actions.move_gripper(ctx, arm, width_m)


@tool(outcome=["grasped"])
def grasp(arm: ArmName, width_m: Width = 0.0, force_n: Force = 20.0, *, ctx: ToolContext[FrankaRuntime]) -> dict[str, Any]:
    """Close one arm's gripper on an object with a force; reports whether something is held.

    Args:
        arm: Which arm's gripper.
        width_m: Expected object width in metres; 0 closes until the fingers meet resistance.
        force_n: Gripping force in newtons (capped by the safety config).
    """
    return actions.grasp(ctx, arm, width_m, force_n)


@tool
@readonly
def get_state(*, ctx: ToolContext[FrankaRuntime]) -> dict[str, Any]:
    """Read both arms' gripper poses (each in its own base frame), joint angles and gripper widths."""
    return {"arms": actions.arm_states(ctx.robot)}


@tool
@readonly
def back_project(
    arm: ArmName,
    camera: CameraName,
    row: PixelIndex,
    col: PixelIndex,
    step: Step = -1,
    radius: Radius = 6,
    *,
    ctx: ToolContext[FrankaRuntime],
) -> dict[str, Any]:
    """Turn a pixel of an image you were shown into a 3-D point in one arm's base frame.

    Pick the pixel in the image exactly as shown (row 0 is the top edge, col 0 the left edge; the
    image is `width` x `height` pixels as listed in `cameras`), e.g. the centre of an object's top
    face. The depth is the median of the surface around that pixel within `radius` pixels, so a
    pixel a little off an edge or on a noisy reading still lands on the object. Returns `xyz_m`
    [x, y, z] in metres in `frame`, the base frame of `arm` (what move_to for that arm takes), and
    `depth_m` (distance from the camera). Works only for cameras listed with back_project true.

    Args:
        arm: Whose base frame the point is given in (the arm that will move there).
        camera: Camera name, as listed in `cameras`.
        row: Pixel row, from 0 at the top of the image.
        col: Pixel column, from 0 at the left of the image.
        step: The `step` listed with that image (the id of the call that returned it); -1 for that camera's latest image.
        radius: Half-size in pixels of the window the depth is read from (0: the pixel alone).
    """
    return actions.back_project(ctx, arm, camera, row, col, step, radius)


@tool
def run_policy(
    arm: ArmName,
    instruction: Instruction,
    max_steps: PolicySteps = 300,
    stop_when: StopConditions | None = None,
    max_duration_s: PolicySeconds = 120.0,
    *,
    ctx: ToolContext[FrankaRuntime],
) -> ToolResult:
    """Let the VLA policy (an openpi DROID policy server) drive one arm and its gripper for a while.

    The other arm stands still, and every step the policy commands keeps clear of it and inside
    the arm's safety envelope; a step that would not stops the arm (stopped: "refused", with the
    limit, the value and the step). The policy sees the front camera and that arm's wrist camera
    at 15 Hz. The result says why the run stopped ("max_steps", "max_duration", "gripper_closed",
    "arm_at_rest", "cancelled", "refused", "policy_error"), the steps and inferences it took, the
    pose the arm ended at and whether its gripper holds something.

    Args:
        arm: Which arm the policy drives.
        instruction: What the policy should do, in plain words (its prompt).
        max_steps: Control steps at most (15 per second).
        stop_when: End early when "gripper_closed" (the gripper holds something) or "arm_at_rest" (the policy stopped moving).
        max_duration_s: Wall-clock seconds at most.
    """
    return actions.run_policy(ctx, arm, instruction, max_steps, stop_when or [], max_duration_s)


DUAL_FRANKA_TOOLS = [
    move_to, move_by, move_both_to, move_both_by, move_joints, home, open_gripper, move_gripper, grasp,
    get_state, tools.capture_images, back_project, run_policy, tools.recover, tools.finish,
]  # fmt: skip
