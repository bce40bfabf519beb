"""The limits a Franka arm's safety envelope holds it to (robots.franka.safety checks them): the
FR3's datasheet limits, the workspace box, the table, and `ArmLimits`, one arm's limits.

Limits come from YAML (config/franka_safety.yaml, read by robots.franka.safety.load_safety_config);
the defaults here are deliberately conservative so a missing or partial file never widens what the
arm may do.
"""

from __future__ import annotations

import math

from pydantic import BaseModel, ConfigDict, Field, model_validator

# Franka Research 3 joint limits [rad] from the FR3 datasheet.
FR3_JOINT_LOWER = (-2.7437, -1.7837, -2.9007, -3.0421, -2.8065, 0.5445, -3.0159)
FR3_JOINT_UPPER = (2.7437, 1.7837, 2.9007, -0.1518, 2.8065, 4.5169, 3.0159)
# FR3 joint velocity [rad/s] and acceleration [rad/s^2] maxima (datasheet): no file may exceed them.
FR3_JOINT_VELOCITY_MAX = (2.62, 2.62, 2.62, 2.62, 5.26, 4.18, 5.26)
FR3_JOINT_ACCELERATION_MAX = (10.0, 10.0, 10.0, 10.0, 10.0, 10.0, 10.0)
# FR3 joint jerk maximum [rad/s^3] (libfranka's rate limits): what franky's motions scale down from.
FR3_JOINT_JERK_MAX = (5000.0,) * 7


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


class Table(BaseModel):
    """The table top in the world frame (the frame arm bases are placed in): links stay above it."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    top_z_m: float = 0.20
    x_m: tuple[float, float] = (0.30, 0.80)
    y_m: tuple[float, float] = (-0.60, 0.60)


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
    table: Table = Table()
    table_margin_m: float = Field(0.005, ge=0, le=0.2)
    floor_z_m: float = 0.0
    max_tilt_deg: float = Field(60.0, gt=0, le=180)
    path_step_m: float = Field(0.01, gt=0, le=0.05)
    path_step_rad: float = Field(0.05, gt=0, le=0.2)
    min_arm_distance_m: float = Field(0.10, ge=0, le=1.0)
    keep_out_margin_m: float = Field(0.02, ge=0, le=0.5)  # between a keep-out zone and any link or the hand
    # Streamed joint commands (a policy's steps), per joint: the velocity a step is scaled down to, and
    # the acceleration of the motion that runs it (robots.franka.policy.step_safety).
    max_joint_velocity_rad_s: tuple[float, ...] = (1.0,) * 7
    max_joint_acceleration_rad_s2: tuple[float, ...] = (8.0,) * 7
    # When a result may say `reached` / `grasped` (truth thresholds, not limits).
    reach_tolerance_m: float = Field(0.005, gt=0, le=0.1)
    reach_tolerance_deg: float = Field(2.0, gt=0, le=30)
    grasp_min_width_m: float = Field(0.002, ge=0, le=0.08)

    @model_validator(mode="after")
    def _consistent(self) -> ArmLimits:
        if len(self.joint_lower_rad) != 7 or len(self.joint_upper_rad) != 7:
            raise ValueError("joint_lower_rad and joint_upper_rad must have 7 values each")
        for field, maxima in (("max_joint_velocity_rad_s", FR3_JOINT_VELOCITY_MAX),
                              ("max_joint_acceleration_rad_s2", FR3_JOINT_ACCELERATION_MAX)):
            values = getattr(self, field)
            if len(values) != 7 or not all(0 < v <= m for v, m in zip(values, maxima, strict=False)):
                raise ValueError(f"{field}: must be 7 values, each > 0 and at most the FR3's {list(maxima)}, got {list(values)}")
        if self.default_speed_factor > self.max_speed_factor:
            raise ValueError(
                f"default_speed_factor {self.default_speed_factor} exceeds max_speed_factor {self.max_speed_factor}"
            )
        return self
