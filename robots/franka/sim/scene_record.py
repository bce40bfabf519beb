"""Ground truth of the simulated scene for the run record: where every object is, in the world frame
and in each arm's base frame. Read from MuJoCo, so only tests and evaluations see it, never a tool."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from rpent.runtime.types import quat_from_matrix

if TYPE_CHECKING:
    from robots.franka.sim.simulator import FrankaSim


def object_poses(sim: FrankaSim, arm_names: Sequence[str]) -> dict[str, dict[str, Any]]:
    """Per object: `xyz_m` (world frame: the frame arm bases are placed in), `xyz_m_by_arm` (each
    arm's base frame), `yaw_deg` (turn about the vertical, (-180, 180]; a cube looks the same every
    90 degrees) and `quaternion_xyzw` (world frame; tells a cube that has tipped over)."""
    poses: dict[str, dict[str, Any]] = {}
    for obj in sim.scene.objects:
        position, rotation = sim.body_pose(obj.name)
        poses[obj.name] = {
            "xyz_m": _rounded(position),
            "xyz_m_by_arm": {
                name: _rounded(position - sim.arm_position(index)) for index, name in enumerate(arm_names)
            },
            "yaw_deg": round(math.degrees(math.atan2(rotation[1, 0], rotation[0, 0])), 2),
            "quaternion_xyzw": _rounded(quat_from_matrix(rotation), 5),
        }
    return poses


def _rounded(values: Any, digits: int = 4) -> list[float]:
    return [round(float(v), digits) for v in values]
