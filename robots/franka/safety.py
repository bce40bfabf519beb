"""The safety envelope: limits every Franka command is checked against before franky sees it.

Limits come from YAML (config/franka_safety.yaml); the defaults here are deliberately
conservative so a missing or partial file never widens what the arm may do.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, model_validator

from rpent.runtime.arm import MotionRefused
from rpent.runtime.types import Pose

# Franka Research 3 joint limits [rad] from the FR3 datasheet.
FR3_JOINT_LOWER = (-2.7437, -1.7837, -2.9007, -3.0421, -2.8065, 0.5445, -3.0159)
FR3_JOINT_UPPER = (2.7437, 1.7837, 2.9007, -0.1518, 2.8065, 4.5169, 3.0159)


class Box(BaseModel):
    """An axis-aligned box in the robot base frame [m]."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    x: tuple[float, float] = (0.30, 0.70)
    y: tuple[float, float] = (-0.30, 0.30)
    z: tuple[float, float] = (0.21, 0.65)

    @model_validator(mode="after")
    def _ordered(self) -> Box:
        for axis in ("x", "y", "z"):
            lo, hi = getattr(self, axis)
            if not lo < hi:
                raise ValueError(f"workspace_m.{axis}: lower bound {lo} must be below upper bound {hi}")
        return self


class ArmLimits(BaseModel):
    """Limits for one arm. Every field has a conservative default."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    workspace_m: Box = Box()
    max_step_m: float = Field(0.10, gt=0, le=0.5)
    max_rotation_step_rad: float = Field(0.6, gt=0, le=math.pi)
    max_reach_m: float = Field(0.80, gt=0, le=0.9)
    joint_lower_rad: tuple[float, ...] = FR3_JOINT_LOWER
    joint_upper_rad: tuple[float, ...] = FR3_JOINT_UPPER
    joint_margin_rad: float = Field(0.10, ge=0, le=0.5)
    max_speed_factor: float = Field(0.30, gt=0, le=1.0)
    max_acceleration_factor: float = Field(0.30, gt=0, le=1.0)
    default_speed_factor: float = Field(0.20, gt=0, le=1.0)
    max_gripper_force_n: float = Field(40.0, gt=0, le=140.0)
    max_gripper_width_m: float = Field(0.08, gt=0, le=0.08)
    require_approval: bool = False
    approval_timeout_s: float = Field(30.0, gt=0)

    @model_validator(mode="after")
    def _consistent(self) -> ArmLimits:
        if len(self.joint_lower_rad) != 7 or len(self.joint_upper_rad) != 7:
            raise ValueError("joint_lower_rad and joint_upper_rad must have 7 values each")
        if self.default_speed_factor > self.max_speed_factor:
            raise ValueError(
                f"default_speed_factor {self.default_speed_factor} exceeds max_speed_factor {self.max_speed_factor}"
            )
        return self


class SafetyEnvelope:
    """Checks commands for one arm against its limits; raises MotionRefused naming limit and value."""

    def __init__(self, limits: ArmLimits | None = None, arm_name: str = "arm") -> None:
        self.limits = limits or ArmLimits()
        self.arm_name = arm_name

    def _refuse(self, limit: str, value: object, rule: str) -> MotionRefused:
        return MotionRefused(f"{self.arm_name}.{limit}", value, rule)

    def check_pose(self, pose: Pose, what: str = "target") -> None:
        box = self.limits.workspace_m
        for axis, value, (lo, hi) in zip("xyz", pose.position, (box.x, box.y, box.z), strict=False):
            if not lo <= value <= hi:
                raise self._refuse(f"{what}.{axis}_m", round(value, 4), f"workspace_m.{axis} [{lo}, {hi}]")
        # The shoulder sits 0.333 m above the base; farther than the reach the arm is stretched out.
        reach = math.dist(pose.position, (0.0, 0.0, 0.333))
        if reach > self.limits.max_reach_m:
            raise self._refuse(f"{what}.reach_m", round(reach, 4), f"max_reach_m {self.limits.max_reach_m}")

    def check_step(self, start: Pose, target: Pose, what: str = "step") -> None:
        dist = start.distance_to(target)
        if dist > self.limits.max_step_m + 1e-9:
            raise self._refuse(f"{what}.length_m", round(dist, 4), f"max_step_m {self.limits.max_step_m}")
        angle = start.angle_to(target)
        if angle > self.limits.max_rotation_step_rad + 1e-9:
            raise self._refuse(
                f"{what}.rotation_rad", round(angle, 4), f"max_rotation_step_rad {self.limits.max_rotation_step_rad}"
            )

    def check_joints(self, joints: Sequence[float], what: str = "joints") -> None:
        if len(joints) != 7:
            raise self._refuse(f"{what}.count", len(joints), "exactly 7 joint values")
        margin = self.limits.joint_margin_rad
        for i, (q, lo, hi) in enumerate(
            zip(joints, self.limits.joint_lower_rad, self.limits.joint_upper_rad, strict=False)
        ):
            if not math.isfinite(q) or not lo + margin <= q <= hi - margin:
                raise self._refuse(
                    f"{what}[{i}]_rad",
                    round(float(q), 4),
                    f"joint {i + 1} limits [{lo}, {hi}] with margin {margin}",
                )

    def speed_factor(self, requested: float | None) -> float:
        """The relative dynamics factor to use: the default, or the request if within the cap."""
        if requested is None:
            return self.limits.default_speed_factor
        if not (0 < requested <= self.limits.max_speed_factor):
            raise self._refuse(
                "speed_factor", requested, f"0 < speed_factor <= max_speed_factor {self.limits.max_speed_factor}"
            )
        return float(requested)

    def check_gripper(self, width_m: float | None = None, force_n: float | None = None) -> None:
        if width_m is not None and not (0.0 <= width_m <= self.limits.max_gripper_width_m):
            raise self._refuse("gripper_width_m", width_m, f"0 <= width <= {self.limits.max_gripper_width_m}")
        if force_n is not None and not (0.0 < force_n <= self.limits.max_gripper_force_n):
            raise self._refuse(
                "gripper_force_n", force_n, f"0 < force <= max_gripper_force_n {self.limits.max_gripper_force_n}"
            )


class SafetyConfig(BaseModel):
    """The whole YAML file: `default` limits, and per-arm overrides merged over them."""

    model_config = ConfigDict(extra="forbid")
    default: ArmLimits = ArmLimits()
    arms: dict[str, dict[str, Any]] = {}

    def limits_for(self, arm_name: str) -> ArmLimits:
        override = self.arms.get(arm_name)
        if not override:
            return self.default
        merged = self.default.model_dump()
        merged.update(override)
        try:
            return ArmLimits.model_validate(merged)
        except ValueError as exc:
            raise ValueError(f"safety config arms.{arm_name}: {exc}") from exc

    def envelope(self, arm_name: str) -> SafetyEnvelope:
        return SafetyEnvelope(self.limits_for(arm_name), arm_name)


def load_safety_config(path: str | Path | None) -> SafetyConfig:
    """Read a safety YAML file; None gives the built-in conservative defaults."""
    if path is None:
        return SafetyConfig()
    path = Path(path)
    data = yaml.safe_load(path.read_text()) or {}
    try:
        return SafetyConfig.model_validate(data)
    except ValueError as exc:
        raise ValueError(f"{path}: {exc}") from exc
