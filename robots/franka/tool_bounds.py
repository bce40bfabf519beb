"""The Franka tools' numeric ranges, taken from the loaded safety envelope: the schema a model reads
states the limits the arm enforces (workspace_m x 0.30-0.70, not a sanity -1..1), one source of truth.

Parameters are matched by name: `x_m`/`y_m`/`z_m` take the workspace box (with several arms, the
box of whichever arm the call names, so the union of theirs; `left_x_m` the left arm's own box),
`dx_m`... the longest step, `droll_rad`... the largest rotation step, `speed_factor`,
`width_m` and `force_n` their caps. The envelope still checks every motion whole (path, reach,
tilt, table): the ranges are what a single number can be told up front.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from robots.franka.safety_limits import ArmLimits
from rpent.tools import Tool
from rpent.tools.bounds import Bounds, with_bounds

_AXES = ("x", "y", "z")


def envelope_bounds(limits_by_arm: Mapping[str, ArmLimits]) -> dict[str, Bounds]:
    """Parameter name -> the range the envelope enforces for it (the widest over the arms)."""
    limits = list(limits_by_arm.values())
    if not limits:
        return {}
    bounds: dict[str, Bounds] = {}
    for axis in _AXES:
        bounds[f"{axis}_m"] = _box(limits, axis)
        for arm, arm_limits in limits_by_arm.items():
            bounds[f"{arm}_{axis}_m"] = _box([arm_limits], axis)
        step = max(lim.max_step_m for lim in limits)
        bounds[f"d{axis}_m"] = Bounds(ge=-step, le=step)
    rotation = max(lim.max_rotation_step_rad for lim in limits)
    for angle in ("droll_rad", "dpitch_rad", "dyaw_rad"):
        bounds[angle] = Bounds(ge=-rotation, le=rotation)
    bounds["speed_factor"] = Bounds(gt=0.0, le=max(lim.max_speed_factor for lim in limits))
    bounds["width_m"] = Bounds(ge=0.0, le=max(lim.max_gripper_width_m for lim in limits))
    bounds["force_n"] = Bounds(gt=0.0, le=max(lim.max_gripper_force_n for lim in limits))
    return bounds


def _box(limits: Sequence[ArmLimits], axis: str) -> Bounds:
    ranges = [getattr(lim.workspace_m, axis) for lim in limits]
    return Bounds(ge=min(lo for lo, _ in ranges), le=max(hi for _, hi in ranges))


def envelope_tools(tools: Sequence[Tool], limits_by_arm: Mapping[str, ArmLimits]) -> list[Tool]:
    """`tools` with their ranges narrowed to the envelope of these arms."""
    bounds = envelope_bounds(limits_by_arm)
    return [with_bounds(t, bounds) for t in tools]
