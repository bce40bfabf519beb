"""What the model may do with the toy arm."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field

from robots.toy.runtime import TABLE_M, ToyWorld
from rpent.tools import ToolContext, ToolResult, readonly, tool
from rpent.tools.finish import make_finish_tool
from rpent.tools.images import encode_png

Metres = Annotated[float, Field(ge=0.0, le=TABLE_M)]
Height = Annotated[float, Field(ge=0.0, le=0.3)]


@tool
def move_to(x_m: Metres, y_m: Metres, z_m: Height = 0.1, *, ctx: ToolContext[ToyWorld]) -> dict[str, Any]:
    """Move the gripper in a straight line to a point above the table.

    The table frame has its origin at one corner; x and y run along the table edges, z is the
    height of the fingertips above the table. A block's top is at z = 0.04.

    Args:
        x_m: Target x in metres (0 to 0.6).
        y_m: Target y in metres (0 to 0.6).
        z_m: Target fingertip height in metres (0 to 0.3).
    """
    world = ctx.robot
    # The video shows where each motion began, also one cancelled before its first step.
    ctx.record_frame(world.render_top())
    ctx.report("moving", f"to ({x_m:.3f}, {y_m:.3f}, {z_m:.3f}) m")  # what the dashboard's timeline row shows
    reached = world.move_to(
        (x_m, y_m, z_m),
        should_stop=ctx.wait_cancelled,
        on_step=lambda: ctx.record_frame(world.render_top()),
    )
    ctx.check_cancelled()
    return {"reached": reached}


@tool
def grasp(*, ctx: ToolContext[ToyWorld]) -> dict[str, Any]:
    """Close the gripper. It holds a block if the fingertips are at the block's top (within 2 cm)."""
    held = ctx.robot.grasp()
    if held is None:
        return ToolResult(data={"holding": None}, error="grasp closed on nothing: no block top at the fingertips")
    return {"holding": held}


@tool
def release(*, ctx: ToolContext[ToyWorld]) -> dict[str, Any]:
    """Open the gripper; a held block drops straight down."""
    return {"released": ctx.robot.release()}


@tool
@readonly
def get_state(*, ctx: ToolContext[ToyWorld]) -> dict[str, Any]:
    """Read the gripper position, whether it is open, what it holds, and every block's position."""
    return ctx.robot.state()


@tool
@readonly
def capture_image(*, ctx: ToolContext[ToyWorld]) -> ToolResult:
    """Take a top-down picture of the table (x to the right, y downwards)."""
    return ToolResult(data={"camera": "top"}, images=[encode_png(ctx.robot.render_top())], image_names=["top"])


@tool
@readonly
def observe(duration_s: Annotated[float, Field(gt=0.0, le=10.0)] = 1.0, *, ctx: ToolContext[ToyWorld]) -> ToolResult:
    """Watch the table without moving for a while (e.g. until something settles), then take a top-down picture.

    Args:
        duration_s: How long to watch, in seconds (at most 10).
    """
    ctx.wait_cancelled(duration_s)
    ctx.check_cancelled()
    return ToolResult(data={"watched_s": duration_s, "camera": "top"}, images=[encode_png(ctx.robot.render_top())],
                      image_names=["top"])


finish = make_finish_tool()


TOY_TOOLS = [move_to, grasp, release, get_state, capture_image, observe, finish]
