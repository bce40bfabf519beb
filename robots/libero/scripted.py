"""A scripted pick-and-place that uses only the toolkit's tools (and the object positions they report).

It measures whether the tools are sufficient for LIBERO's single pick-and-place tasks; tests and
bench/bench_libero.py run it. It reads the goal from `get_state` (e.g. ["in", "alphabet_soup_1",
"basket_1_contain_region"]), grasps the first object and places it over the second one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rpent.tools import ToolResult
from rpent.tools.api import ToolkitAPI

APPROACH_ABOVE_M = 0.12
CARRY_CLEARANCE_M = 0.08
RELEASE_ABOVE_M = 0.03
GRIPPER_OPENING_M = 0.07
GRASP_BELOW_TOP_M = 0.04
RIM_INSET_M = 0.012
RIM_DEPTH_M = 0.015
RETRY_LOWER_M = 0.02


class ScriptError(RuntimeError):
    pass


@dataclass
class ScriptOutcome:
    solved: bool
    goal: list[str]
    calls: list[tuple[str, bool]] = field(default_factory=list)  # (tool, ok)
    note: str = ""


def _anchor(target: str, names: list[str]) -> str | None:
    """The object a goal argument refers to: itself, or the object owning a region like `basket_1_contain_region`."""
    if target in names:
        return target
    owners = [n for n in names if target.startswith(n + "_")]
    return max(owners, key=len) if owners else None


def pick_and_place(toolkit: ToolkitAPI) -> ScriptOutcome:
    """Run the scripted sequence; returns the env's own verdict (`toolkit.solved()`)."""
    calls: list[tuple[str, bool]] = []

    def call(name: str, **arguments: Any) -> ToolResult:
        result = toolkit.execute_tool(name, arguments)
        calls.append((name, not result.is_error))
        return result

    state = call("get_state").data
    goals = [g for g in state["goal"] if len(g) == 3 and g[0] in ("in", "on")]
    if not goals:
        return ScriptOutcome(False, state["goal"][0] if state["goal"] else [], calls, "no in/on goal to script")
    goal = goals[0]
    objects: dict[str, dict[str, list[float]]] = state["objects"]
    obj, target = goal[1], _anchor(goal[2], list(objects))
    if obj not in objects or target is None or "box_min_m" not in objects[obj] or "box_min_m" not in objects[target]:
        return ScriptOutcome(False, goal, calls, f"goal refers to {goal[2]!r}, which is not a movable object")
    # Try grasp points in turn; the gripper's opening says whether one held (tilted or stacked
    # objects are not where their bounding box suggests).
    held = False
    for gx, gy, gz in grasp_candidates(objects[obj]):
        call("open_gripper")
        call("move_to", x_m=gx, y_m=gy, z_m=gz + APPROACH_ABOVE_M)
        call("move_to", x_m=gx, y_m=gy, z_m=gz, max_steps=80)
        held = bool(call("close_gripper").data.get("holding_something"))
        if held:
            break
        call("move_by", dz_m=APPROACH_ABOVE_M)
    note = "" if held else "every grasp closed on nothing"
    lo, hi = objects[target]["box_min_m"], objects[target]["box_max_m"]
    # Put the object's centre (not the fingers) over the target's centre.
    olo, ohi = objects[obj]["box_min_m"], objects[obj]["box_max_m"]
    tx = (lo[0] + hi[0]) / 2 + gx - (olo[0] + ohi[0]) / 2
    ty = (lo[1] + hi[1]) / 2 + gy - (olo[1] + ohi[1]) / 2
    # Release with the object's bottom a little above the target's top (inside a basket, it drops in).
    hanging_m = gz - olo[2]
    place_z = hi[2] + hanging_m + RELEASE_ABOVE_M
    carry_z = max(place_z, gz) + CARRY_CLEARANCE_M
    call("move_to", x_m=gx, y_m=gy, z_m=carry_z)
    call("move_to", x_m=tx, y_m=ty, z_m=carry_z)
    call("move_to", x_m=tx, y_m=ty, z_m=place_z)
    call("open_gripper")
    call("lift", height_m=0.1)
    believed = all(ok for _, ok in calls) and not note
    call("finish", status="success" if believed else "failure", summary=f"scripted pick of {obj}, placed over {target}")
    return ScriptOutcome(bool(toolkit.solved()), goal, calls, note)


def grasp_candidates(entry: dict[str, list[float]]) -> list[tuple[float, float, float]]:
    """Where to close the fingers on an object, from its bounding box, best guess first.

    Narrow objects are grasped across their middle a few centimetres below the top, then lower.
    Objects wider than the open gripper (bowls) are pinched at their rim on a side along y (the
    axis the fingers close along at the home yaw): the far side, lower on it, then the near side.
    """
    lo, hi = entry["box_min_m"], entry["box_max_m"]
    cx, cy = (lo[0] + hi[0]) / 2, (lo[1] + hi[1]) / 2
    width_x, width_y = hi[0] - lo[0], hi[1] - lo[1]
    if min(width_x, width_y) > GRIPPER_OPENING_M:
        z = hi[2] - RIM_DEPTH_M
        return [
            (cx, hi[1] - RIM_INSET_M, z),
            (cx, hi[1] - RIM_INSET_M, z - RETRY_LOWER_M),
            (cx, lo[1] + RIM_INSET_M, z),
        ]
    z = max(lo[2] + 0.015, hi[2] - GRASP_BELOW_TOP_M)
    return [(cx, cy, z), (cx, cy, max(lo[2] + 0.01, z - RETRY_LOWER_M))]
