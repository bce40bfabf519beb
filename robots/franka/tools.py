"""What the model may do with one Franka arm (real, or franky-sim with --sim: the tools cannot tell)."""

from __future__ import annotations

from typing import Any

from robots.franka import actions
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
from robots.franka.runtime import FrankaRuntime
from rpent.tools import ToolContext, ToolResult, readonly, tool
from rpent.tools.finish import make_finish_tool


@tool(outcome=["reached"])
def move_to(
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
    """Move the gripper (its fingertip centre) to a pose in the robot base frame.

    The base frame: x forward from the robot, y to the robot's left, z up, origin at the robot's
    foot. Orientation: give roll/pitch/yaw (missing angles keep their current value), or a
    quaternion, or neither to keep the current orientation. Pointing straight down is roll=pi,
    pitch=0. Moves outside the configured workspace are refused and the arm does not move.

    Args:
        x_m: Target x in metres.
        y_m: Target y in metres.
        z_m: Target z in metres.
        roll_rad: Target roll about x in radians (fixed axes, applied x then y then z).
        pitch_rad: Target pitch about y in radians.
        yaw_rad: Target yaw about z in radians.
        quaternion_xyzw: Target orientation as a unit quaternion [x, y, z, w] instead of roll/pitch/yaw.
        speed_factor: Fraction of the maximum speed (default from the safety config, capped there).
    """
    return actions.move_to(ctx, None, (x_m, y_m, z_m), (roll_rad, pitch_rad, yaw_rad), quaternion_xyzw, speed_factor)


@tool(outcome=["reached"])
def move_by(
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
    """Move the gripper by an offset in the robot base frame (x forward, y left, z up).

    Rotations turn the gripper about the base axes through its own position. Steps longer than
    the configured maximum step are refused and the arm does not move.

    Args:
        dx_m: Offset along x in metres.
        dy_m: Offset along y in metres.
        dz_m: Offset along z in metres.
        droll_rad: Rotation about the base x axis in radians.
        dpitch_rad: Rotation about the base y axis in radians.
        dyaw_rad: Rotation about the base z axis in radians.
        speed_factor: Fraction of the maximum speed (default from the safety config, capped there).
    """
    return actions.move_by(ctx, None, (dx_m, dy_m, dz_m), (droll_rad, dpitch_rad, dyaw_rad), speed_factor)


@tool(outcome=["reached"])
def move_joints(joints_rad: Joints, speed_factor: SpeedFactor | None = None, *, ctx: ToolContext[FrankaRuntime]) -> dict[str, Any]:
    """Move the seven arm joints to the given angles (joint 1 at the base first).

    Targets closer to a joint limit than the configured margin are refused.

    Args:
        joints_rad: Seven joint angles in radians.
        speed_factor: Fraction of the maximum speed (default from the safety config, capped there).
    """
    return actions.move_joints(ctx, None, joints_rad, speed_factor)


@tool(outcome=["reached"])
def home(speed_factor: SpeedFactor | None = None, *, ctx: ToolContext[FrankaRuntime]) -> dict[str, Any]:
    """Move the arm to its home joint configuration (gripper above the table, pointing down).

    Args:
        speed_factor: Fraction of the maximum speed (default from the safety config, capped there).
    """
    return actions.home(ctx, list(ctx.robot.arms), speed_factor)


@tool
def open_gripper(*, ctx: ToolContext[FrankaRuntime]) -> dict[str, Any]:
    """Open the gripper fully (releases whatever it holds)."""
    return actions.open_gripper(ctx, None)


@tool
def move_gripper(width_m: Width, *, ctx: ToolContext[FrankaRuntime]) -> dict[str, Any]:
    """Move the gripper fingers to an opening width without gripping force.

    Args:
        width_m: Distance between the fingers in metres (0 to 0.08).
    """
    return actions.move_gripper(ctx, None, width_m)


@tool(outcome=["grasped"])
def grasp(width_m: Width = 0.0, force_n: Force = 20.0, *, ctx: ToolContext[FrankaRuntime]) -> dict[str, Any]:
    """Close the gripper on an object with a force; reports whether something is held.

    Args:
        width_m: Expected object width in metres; 0 closes until the fingers meet resistance.
        force_n: Gripping force in newtons (capped by the safety config).
    """
    return actions.grasp(ctx, None, width_m, force_n)


@tool
@readonly
def get_state(*, ctx: ToolContext[FrankaRuntime]) -> dict[str, Any]:
    """Read the gripper pose (base frame), joint angles and gripper width of the arm."""
    return {"arms": actions.arm_states(ctx.robot)}


@tool
@readonly
def capture_images(*, ctx: ToolContext[FrankaRuntime]) -> ToolResult:
    """Take one picture with every camera.

    The images come in the order of `cameras`; each entry names the camera, its image size in
    pixels, whether it has depth, whether back_project can place its pixels, and the image's
    `step` (this call's id) to pass to back_project.
    """
    return actions.capture_images(ctx)


@tool
@readonly
def back_project(
    camera: CameraName,
    row: PixelIndex,
    col: PixelIndex,
    step: Step = -1,
    radius: Radius = 6,
    *,
    ctx: ToolContext[FrankaRuntime],
) -> dict[str, Any]:
    """Turn a pixel of an image you were shown into a 3-D point in the robot base frame.

    Pick the pixel in the image exactly as shown (row 0 is the top edge, col 0 the left edge; the
    image is `width` x `height` pixels as listed in `cameras`), e.g. the centre of an object's top
    face. The depth is the median of the surface around that pixel within `radius` pixels, so a
    pixel a little off an edge or on a noisy reading still lands on the object. Returns `xyz_m`
    [x, y, z] in metres in `frame` (the base frame move_to uses) and `depth_m` (distance from the
    camera). Works only for cameras listed with back_project true.

    Args:
        camera: Camera name, as listed in `cameras`.
        row: Pixel row, from 0 at the top of the image.
        col: Pixel column, from 0 at the left of the image.
        step: The `step` listed with that image (the id of the call that returned it); -1 for that camera's latest image.
        radius: Half-size in pixels of the window the depth is read from (0: the pixel alone).
    """
    return actions.back_project(ctx, None, camera, row, col, step, radius)


@tool
def run_policy(
    instruction: Instruction,
    max_steps: PolicySteps = 300,
    stop_when: StopConditions | None = None,
    max_duration_s: PolicySeconds = 120.0,
    *,
    ctx: ToolContext[FrankaRuntime],
) -> ToolResult:
    """Let the VLA policy (an openpi DROID policy server) drive the arm and the gripper for a while.

    Good for contact-rich manipulation you can describe in a sentence ("pick up the red cube").
    The policy sees the exterior and the wrist camera at 15 Hz; every step it commands is checked
    against the safety envelope first, and a step that would leave it stops the arm
    (stopped: "refused", with the limit, the value and the step). The result says why the run
    stopped ("max_steps", "max_duration", "gripper_closed", "arm_at_rest", "cancelled", "refused",
    "policy_error"), the steps and inferences it took, the pose the arm ended at and whether the
    gripper holds something.

    Args:
        instruction: What the policy should do, in plain words (its prompt).
        max_steps: Control steps at most (15 per second).
        stop_when: End early when "gripper_closed" (the gripper holds something) or "arm_at_rest" (the policy stopped moving).
        max_duration_s: Wall-clock seconds at most.
    """
    return actions.run_policy(ctx, None, instruction, max_steps, stop_when or [], max_duration_s)


@tool
def recover(*, ctx: ToolContext[FrankaRuntime]) -> dict[str, Any]:
    """Clear a controller error (e.g. after a collision reflex) so the arm accepts motions again."""
    return actions.recover(ctx)


finish = make_finish_tool()


FRANKA_TOOLS = [
    move_to, move_by, move_joints, home, open_gripper, move_gripper, grasp,
    get_state, capture_images, back_project, run_policy, recover, finish,
]  # fmt: skip
