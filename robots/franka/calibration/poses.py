"""The arm poses a hand-eye calibration visits: read from a file, or spread around the home pose.

A poses file (YAML or JSON) is a list, or a mapping with a `poses` list, of entries like
    - {name: left_tilt, joints_rad: [0.1, -0.2, 0.0, -2.0, 0.0, 1.8, 0.6]}
    - {position_m: [0.5, 0.05, 0.45], rpy_rad: [3.0, 0.2, 0.1]}       # TCP pose, base frame
    - {position_m: [0.5, 0.0, 0.45], quaternion_xyzw: [1, 0, 0, 0]}
Every pose is visited through the safety envelope like any tool motion; one it refuses is skipped.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import numpy as np
import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from robots.franka import kinematics
from rpent.runtime.types import Pose, quat_from_matrix

# Automatic poses: how far they reach from the home pose. Tilts of 8..20 deg about two axes and
# turns about the approach axis give hand-eye the rotation spread it needs; the ranges keep a
# board that faces the camera at home in view.
AUTO_TILT_DEG = (8.0, 20.0)
AUTO_TURN_DEG = 30.0
AUTO_SHIFT_M = (0.05, 0.05, 0.04)
AUTO_ATTEMPTS_PER_POSE = 20


@dataclass(frozen=True)
class CalibrationPose:
    """One pose to visit: joint angles, or a TCP pose in the arm's base frame."""

    label: str
    joints_rad: tuple[float, ...] | None = None
    tcp: Pose | None = None


class _Entry(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str | None = None
    joints_rad: Annotated[list[float], Field(min_length=7, max_length=7)] | None = None
    position_m: Annotated[list[float], Field(min_length=3, max_length=3)] | None = None
    rpy_rad: Annotated[list[float], Field(min_length=3, max_length=3)] | None = None
    quaternion_xyzw: Annotated[list[float], Field(min_length=4, max_length=4)] | None = None

    @model_validator(mode="after")
    def _one_kind(self) -> _Entry:
        if (self.joints_rad is None) == (self.position_m is None):
            raise ValueError("give either joints_rad or position_m (with rpy_rad or quaternion_xyzw)")
        if self.joints_rad is not None and (self.rpy_rad is not None or self.quaternion_xyzw is not None):
            raise ValueError("joints_rad takes no orientation; rpy_rad / quaternion_xyzw go with position_m")
        if self.position_m is not None and (self.rpy_rad is None) == (self.quaternion_xyzw is None):
            raise ValueError("position_m needs exactly one of rpy_rad or quaternion_xyzw")
        return self


def load_poses(path: str | Path) -> list[CalibrationPose]:
    """Read a poses file; ValueError naming the file, the entry and the rule."""
    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise ValueError(f"--poses: cannot read {path}: {exc}") from None
    if isinstance(data, dict) and set(data) == {"poses"}:
        data = data["poses"]
    if not isinstance(data, list) or not data:
        raise ValueError(f"--poses: {path} must hold a non-empty list of poses (or a mapping with a `poses` list)")
    poses = []
    for index, item in enumerate(data):
        try:
            entry = _Entry.model_validate(item)
        except ValidationError as exc:
            problems = "; ".join(f"{'.'.join(str(p) for p in e['loc']) or 'entry'}: {e['msg']}" for e in exc.errors())
            raise ValueError(f"--poses: {path} entry {index}: {problems}") from None
        label = entry.name or f"pose {index}"
        if entry.joints_rad is not None:
            poses.append(CalibrationPose(label, joints_rad=tuple(entry.joints_rad)))
        elif entry.rpy_rad is not None:
            poses.append(CalibrationPose(label, tcp=Pose.from_rpy(entry.position_m, entry.rpy_rad)))
        else:
            poses.append(CalibrationPose(label, tcp=Pose(tuple(entry.position_m), tuple(entry.quaternion_xyzw))))  # type: ignore[arg-type]
    return poses


def auto_poses(
    home: Pose, count: int, pivot_m: float, seed: int = 0, accept: Callable[[Pose], bool] | None = None
) -> list[CalibrationPose]:
    """`count` TCP poses around `home`: the hand tilted about two horizontal axes and turned about
    its approach axis, all about a pivot `pivot_m` along the approach axis (where the board is, for
    a wrist camera; 0 turns the hand about its TCP, which keeps a hand-held board in view), plus
    small shifts. Deterministic per seed.

    `accept` screens candidates (e.g. the envelope's workspace box) so that few of the poses are
    refused later; each pose is still checked in full when it is visited.
    """
    if count < 1:
        raise ValueError(f"--auto: the number of poses must be at least 1, got {count}")
    rng = np.random.default_rng(seed)
    start = kinematics.pose_matrix(home.position, home.quaternion)
    approach = start[:3, 2]
    pivot = start[:3, 3] + approach * pivot_m
    side = np.cross(approach, [0.0, 0.0, 1.0] if abs(approach[2]) < 0.9 else [1.0, 0.0, 0.0])
    side /= np.linalg.norm(side)
    poses: list[CalibrationPose] = []
    for attempt in range(count * AUTO_ATTEMPTS_PER_POSE):
        if len(poses) == count:
            break
        # Directions spread evenly round the circle (golden angle), so any prefix covers both axes.
        direction = attempt * math.radians(137.5)
        axis = math.cos(direction) * side + math.sin(direction) * np.cross(approach, side)
        tilt = math.radians(rng.uniform(*AUTO_TILT_DEG))
        turn = math.radians(rng.uniform(-AUTO_TURN_DEG, AUTO_TURN_DEG))
        rotation = kinematics.axis_angle_matrix(axis, tilt) @ kinematics.axis_angle_matrix(approach, turn)
        target = np.eye(4)
        target[:3, :3] = rotation @ start[:3, :3]
        target[:3, 3] = pivot + rotation @ (start[:3, 3] - pivot) + rng.uniform(-1.0, 1.0, 3) * AUTO_SHIFT_M
        tcp = Pose(tuple(target[:3, 3]), quat_from_matrix(target[:3, :3]))  # type: ignore[arg-type]
        if accept is None or accept(tcp):
            poses.append(CalibrationPose(f"auto {len(poses) + 1}", tcp=tcp))
    return poses


def describe(pose: CalibrationPose) -> str:
    if pose.joints_rad is not None:
        return f"joints {[round(q, 3) for q in pose.joints_rad]}"
    assert pose.tcp is not None
    return f"TCP at {[round(c, 3) for c in pose.tcp.position]} rpy {[round(a, 3) for a in pose.tcp.rpy]}"

