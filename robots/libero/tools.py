"""What the model may do in a LIBERO scene: closed-loop motions, the gripper, a VLA, cameras."""

from __future__ import annotations

from typing import Annotated, Any, Literal

import numpy as np
from pydantic import Field

from robots.libero import control
from robots.libero.arm import LiberoRobot
from robots.libero.vla import run_policy
from rpent.tools import ToolContext, ToolResult, readonly, tool
from rpent.tools.finish import make_finish_tool
from rpent.tools.images import encode_png

X = Annotated[float, Field(ge=0.0, le=1.0)]
Y = Annotated[float, Field(ge=-0.6, le=0.6)]
Z = Annotated[float, Field(ge=-0.3, le=1.0)]
Offset = Annotated[float, Field(ge=-0.3, le=0.3)]
Yaw = Annotated[float, Field(ge=-180.0, le=180.0)]
StepBudget = Annotated[int, Field(ge=1, le=400)]
Camera = Literal["agentview", "robot0_eye_in_hand"]
ImageSize = Annotated[int, Field(ge=32, le=512)]

#: Episode video: one small agentview frame every RECORD_EVERY control steps keeps rendering cheap.
RECORD_EVERY = 5
RECORD_SIZE = 128


def _recorder(ctx: ToolContext[LiberoRobot], budget: int) -> control.OnStep:
    """Per control step: progress for whoever waits on the call, and a video frame every few steps."""

    def on_step(step: int) -> None:
        ctx.report("moving", f"control step {step}", min(step / budget, 1.0))
        if step % RECORD_EVERY == 0:
            ctx.record_frame(ctx.robot.render("agentview", RECORD_SIZE))

    return on_step


def _stop(ctx: ToolContext[LiberoRobot]) -> control.ShouldStop:
    return lambda: ctx.cancelled


def _motion(ctx: ToolContext[LiberoRobot], target: np.ndarray, yaw_deg: float | None, max_steps: int) -> dict[str, Any]:
    robot = ctx.robot
    with robot.lock:
        robot.ensure_started()
        report = control.move_to(
            robot,
            target,
            yaw_rad=None if yaw_deg is None else float(np.radians(yaw_deg)),
            max_steps=max_steps,
            should_stop=_stop(ctx),
            on_step=_recorder(ctx, max_steps),
        )
    ctx.check_cancelled()
    data = report.to_dict()
    if report.stopped == "stalled":
        return ToolResult(
            data=data,
            error=f"stopped {report.error_m * 100:.1f} cm from the target: no progress for "
            f"{control.STALL_STEPS} steps (blocked by contact, a load or the workspace edge)",
        )
    if not report.reached:
        return ToolResult(
            data=data,
            error=f"did not reach the target within {max_steps} steps "
            f"({report.error_m * 100:.1f} cm away); it may be blocked or out of reach",
        )
    return data


@tool
def move_to(
    x_m: X,
    y_m: Y,
    z_m: Z,
    yaw_deg: Yaw | None = None,
    max_steps: StepBudget = 120,
    *,
    ctx: ToolContext[LiberoRobot],
) -> dict[str, Any]:
    """Move the gripper (the point between the fingertips) to a point in the robot frame.

    Closed loop, about 5 cm per control step at most; stops within 1 cm of the target, when it
    makes no progress for 20 steps (blocked), or after `max_steps` control steps (20 per
    simulated second). The gripper keeps pointing down and
    keeps its opening. Positions of objects come from `get_state` in the same frame.

    Args:
        x_m: Target x in metres (forward from the robot base, 0 to 1).
        y_m: Target y in metres (to the robot's left, -0.6 to 0.6).
        z_m: Target z in metres (up from the robot base; see get_state for object heights).
        yaw_deg: Gripper rotation about the vertical axis, degrees from its episode-start
            orientation (null keeps the current yaw).
        max_steps: Step budget for this motion (1 to 400).
    """
    return _motion(ctx, np.array([x_m, y_m, z_m]), yaw_deg, max_steps)


@tool
def move_by(
    dx_m: Offset = 0.0,
    dy_m: Offset = 0.0,
    dz_m: Offset = 0.0,
    dyaw_deg: Annotated[float, Field(ge=-90.0, le=90.0)] = 0.0,
    max_steps: StepBudget = 80,
    *,
    ctx: ToolContext[LiberoRobot],
) -> dict[str, Any]:
    """Move the gripper by an offset from where it is now, in the robot frame.

    Args:
        dx_m: Offset along x (forward) in metres, -0.3 to 0.3.
        dy_m: Offset along y (left) in metres, -0.3 to 0.3.
        dz_m: Offset along z (up) in metres, -0.3 to 0.3.
        dyaw_deg: Extra rotation about the vertical axis in degrees, -90 to 90.
        max_steps: Step budget for this motion (1 to 400).
    """
    robot = ctx.robot
    with robot.lock:
        robot.ensure_started()
        target = robot.eef_xyz() + np.array([dx_m, dy_m, dz_m])
        yaw = float(np.degrees(robot.eef_yaw_rad())) + dyaw_deg
    return _motion(ctx, target, yaw, max_steps)


@tool
def lift(height_m: Annotated[float, Field(gt=0.0, le=0.3)] = 0.15, *, ctx: ToolContext[LiberoRobot]) -> dict[str, Any]:
    """Raise the gripper straight up (e.g. after a grasp), keeping the gripper closed or open.

    Args:
        height_m: How far to rise in metres (up to 0.3).
    """
    robot = ctx.robot
    with robot.lock:
        robot.ensure_started()
        target = robot.eef_xyz() + np.array([0.0, 0.0, height_m])
    return _motion(ctx, target, None, 120)


def _gripper(ctx: ToolContext[LiberoRobot], close: bool) -> dict[str, Any]:
    robot = ctx.robot
    with robot.lock:
        robot.ensure_started()
        control.set_gripper(robot, close, should_stop=_stop(ctx), on_step=_recorder(ctx, 15))
        pose = robot.pose()
    ctx.check_cancelled()
    return {
        "gripper": pose["gripper"],
        "gripper_width_m": pose["gripper_width_m"],
        "holding_something": pose["holding_something"],
    }


@tool
def close_gripper(*, ctx: ToolContext[LiberoRobot]) -> dict[str, Any]:
    """Close the gripper (grasp). Reports the finger opening: above ~4 mm it closed on something."""
    return _gripper(ctx, True)


@tool
def open_gripper(*, ctx: ToolContext[LiberoRobot]) -> dict[str, Any]:
    """Open the gripper (release what it holds)."""
    return _gripper(ctx, False)


@tool
def reset(
    init_state: Annotated[int, Field(ge=0, le=49)] | None = None, *, ctx: ToolContext[LiberoRobot]
) -> dict[str, Any]:
    """Start the episode over: the scene returns to its initial state, the gripper opens.

    In the "attempts" mode this ends the current attempt and starts the next one; it is refused
    once every attempt of the session is used.

    Args:
        init_state: Index of the benchmark's initial scene layout (null keeps the current one).
    """
    state = ctx.state
    robot = ctx.robot
    with robot.lock:
        if state.get("mode") == "attempts":
            used = len(state["attempt_results"]) + 1
            if used >= state["attempts_per_session"]:
                return ToolResult(
                    data={"attempt": used, "attempts_per_session": state["attempts_per_session"]},
                    error=f"no attempts left: all {state['attempts_per_session']} attempts of this session are used",
                )
            state["attempt_results"].append(robot.success())
        robot.reset(init_state=init_state)
    data: dict[str, Any] = {"reset": True, "init_state": init_state}
    if state.get("mode") == "attempts":
        data["attempt"] = len(state["attempt_results"]) + 1
        data["attempts_per_session"] = state["attempts_per_session"]
    return data


@tool
def run_vla(
    max_steps: StepBudget = 100,
    stop_when: list[Literal["gripper_closed", "object_lifted", "step_budget"]] | None = None,
    object_name: str | None = None,
    instruction: str | None = None,
    with_images: bool = True,
    *,
    ctx: ToolContext[LiberoRobot],
) -> dict[str, Any]:
    """Let the VLA policy drive the arm for up to `max_steps` control steps.

    It stops early when a condition in `stop_when` holds, when the task is solved, or on cancel,
    and reports why it stopped ("gripper_closed", "object_lifted", "task_success", "step_budget",
    "cancelled").

    Args:
        max_steps: Step budget (1 to 400).
        stop_when: Conditions that end the run early: "gripper_closed" (the policy closed the
            gripper), "object_lifted" (`object_name` rose 5 cm above where it started);
            "step_budget" (`max_steps`) always applies.
        object_name: The task object watched by "object_lifted" (a name from get_state).
        instruction: Language instruction for the policy (default: the task's own instruction).
        with_images: Send agentview and wrist images to the policy (off only for state-based policies).
    """
    robot = ctx.robot
    conditions = [c for c in stop_when or [] if c != "step_budget"]
    if robot.policy is None:
        return ToolResult(error="no VLA server is configured: start the run with --vla-endpoint HOST:PORT")
    if "object_lifted" in conditions and object_name is None:
        return ToolResult(error="object_name: required when stop_when contains 'object_lifted'")
    if object_name is not None and object_name not in robot.objects:
        return ToolResult(error=f"object_name: {object_name!r} is not one of {', '.join(robot.objects)}")
    with robot.lock:
        robot.ensure_started()
        outcome = run_policy(
            robot,
            instruction or robot.language,
            max_steps=max_steps,
            stop_when=conditions,
            object_name=object_name,
            with_images=with_images,
            should_stop=_stop(ctx),
            on_step=_recorder(ctx, max_steps),
            on_cancel=ctx.on_cancel,
        )
    ctx.check_cancelled()
    return outcome


@tool
@readonly
def get_state(*, ctx: ToolContext[LiberoRobot]) -> dict[str, Any]:
    """Read the gripper pose, every task object's position and bounding box, and the goal.

    All in the robot frame, metres. `xyz_m` is an object's reference point (its centre or its
    base); `box_min_m` / `box_max_m` are the corners of its axis-aligned bounding box (so the
    top of an object is box_max_m[2]). The goal lists the task's BDDL goal predicates, e.g.
    ["on", "akita_black_bowl_1", "plate_1"]; a region such as "basket_1_contain_region" belongs
    to the object whose name it starts with.
    """
    robot = ctx.robot
    with robot.lock:
        robot.ensure_started()
        data = {
            "task": robot.language,
            **robot.pose(),
            "objects": robot.object_table(),
            "fixtures": robot.fixtures,
            "goal": robot.info["goal"],
            "episode_steps": robot.episode_steps,
        }
    if ctx.state.get("mode") == "attempts":
        data["attempt"] = len(ctx.state["attempt_results"]) + 1
        data["attempts_per_session"] = ctx.state["attempts_per_session"]
    return data


@tool
@readonly
def capture_images(
    cameras: list[Camera] | None = None, size_px: ImageSize = 256, *, ctx: ToolContext[LiberoRobot]
) -> ToolResult:
    """Take pictures now: "agentview" (front view of the table) and/or "robot0_eye_in_hand" (wrist).

    Args:
        cameras: Cameras to use (default both).
        size_px: Image width and height in pixels (32 to 512).
    """
    names = list(cameras or ["agentview", "robot0_eye_in_hand"])
    images = [encode_png(ctx.robot.render(name, size_px)) for name in names]
    return ToolResult(data={"cameras": names, "size_px": size_px}, images=images, image_names=names)


@tool
@readonly
def segment(camera: Camera = "agentview", size_px: ImageSize = 256, *, ctx: ToolContext[LiberoRobot]) -> ToolResult:
    """Find the task's objects in a camera image: pixel count, centroid and bounding box of each.

    Returns the camera image followed by one black-and-white mask per visible object, in the
    order of `objects`. Pixel coordinates are (u right, v down) from the top-left corner. `step`
    is the observation step whose scene this is (the call id of the last action; 0 before any).

    Args:
        camera: "agentview" or "robot0_eye_in_hand".
        size_px: Image width and height in pixels (32 to 512).
    """
    robot = ctx.robot
    # Read-only, so no motion runs meanwhile: the scene is the last observation step's, and the
    # image and masks are that step's artifacts (saved under its name: rpent.record.step_record).
    source = ctx.last_step
    with robot.lock:
        rgb = robot.env.render(camera, width=size_px, height=size_px)
        seg = robot.env.segment(camera, size_px, size_px)
    labels = np.asarray(seg["labels"])
    objects: dict[str, Any] = {}
    images = [encode_png(rgb)]
    for index, name in enumerate(seg["names"], start=1):
        mask = labels == index
        count = int(mask.sum())
        if count == 0:
            continue
        v, u = np.nonzero(mask)
        objects[name] = {
            "pixels": count,
            "centroid_px": [round(float(u.mean()), 1), round(float(v.mean()), 1)],
            "bbox_px": [int(u.min()), int(v.min()), int(u.max()), int(v.max())],
        }
        images.append(encode_png(mask.astype(np.uint8) * 255))
    step = source.call_id if source is not None else None
    return ToolResult(data={"camera": camera, "size_px": size_px, "step": step, "objects": objects}, images=images,
                      image_names=[camera, *(f"{camera}-mask-{name}" for name in objects)], source_step=source)


def _attempt_fields(ctx: ToolContext[LiberoRobot]) -> dict[str, Any]:
    # In attempts mode the result says which attempt the model ended on.
    if ctx.state.get("mode") == "attempts":
        return {"attempts": len(ctx.state["attempt_results"]) + 1}
    return {}


finish = make_finish_tool(_attempt_fields)


LIBERO_TOOLS = [
    move_to,
    move_by,
    lift,
    close_gripper,
    open_gripper,
    reset,
    run_vla,
    get_state,
    capture_images,
    segment,
    finish,
]
