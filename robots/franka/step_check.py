"""The check of one streamed joint step (a policy's action at the control rate), before franky sees it.

A step from the measured joints `q` to a target is checked as every other motion is (the arm's
SafetyEnvelope: the target and the joint-space path to it, for joint limits, the workspace box,
the tilt cone and every link above the table), and also for what streaming adds: the joint
velocity the step implies over one control period, and the change from the arm's measured
velocity that it asks for within that period (both per joint, from the safety file). With a
second arm standing still beside it, the path keeps `min_arm_distance_m` from that arm's links.

A refusal is a StepRefused: the MotionRefused of the envelope (limit, value, rule) plus the index
of the step, so a policy run can say which of its steps was unsafe.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from robots.franka import kinematics
from robots.franka.safety import SafetyEnvelope
from rpent.runtime.arm import MotionRefused


class StepRefused(MotionRefused):
    """A streamed step that would leave the envelope; `step` is its index in the run."""

    def __init__(self, refusal: MotionRefused, step: int) -> None:
        self.step = step
        super().__init__(refusal.limit, refusal.value, refusal.rule)
        self.args = (f"step {step}: {self.args[0]}",)

    def to_dict(self) -> dict[str, object]:
        return {"limit": self.limit, "value": self.value, "rule": self.rule, "step": self.step}


@dataclass(frozen=True)
class KeepClear:
    """Check points of another arm that stands still, in the stepping arm's base frame (P x 3)."""

    other: str
    points: np.ndarray
    min_distance_m: float

    @classmethod
    def of(cls, other: SafetyEnvelope, other_joints: Sequence[float], arm: SafetyEnvelope) -> KeepClear:
        points = other.world_points(np.asarray([other_joints], dtype=float))[0] - arm.base_xyz_m
        minimum = max(other.limits.min_arm_distance_m, arm.limits.min_arm_distance_m)
        return cls(other.arm_name, points, minimum)

    def to_dict(self) -> dict[str, object]:
        return {"other": self.other, "points": self.points.tolist(), "min_distance_m": self.min_distance_m}

    @classmethod
    def from_dict(cls, data: dict[str, object]) -> KeepClear:
        return cls(str(data["other"]), np.asarray(data["points"], dtype=float), float(data["min_distance_m"]))  # type: ignore[arg-type]


def check_step(
    envelope: SafetyEnvelope,
    q: Sequence[float],
    dq: Sequence[float],
    target: Sequence[float],
    period_s: float,
    step: int,
    keep_clear: Sequence[KeepClear] = (),
    stopping_rad_s2: float | None = None,
) -> None:
    """Raise StepRefused if moving from `q` (velocity `dq`) to `target` within `period_s` is unsafe.

    With `stopping_rad_s2`, the deceleration the arm stops with when no next step comes, the path
    is checked on to where the arm would come to rest past the target (v^2 / 2a per joint).
    """
    q0 = np.asarray(q, dtype=float)
    goal = np.asarray(target, dtype=float)
    try:
        if goal.shape != (7,) or not np.all(np.isfinite(goal)):
            raise MotionRefused(f"{envelope.arm_name}.step.target", "not 7 finite values", "7 finite joint angles")
        limits = envelope.limits
        velocity = (goal - q0) / period_s
        _per_joint(envelope, "joint_velocity", "rad_s", np.abs(velocity), limits.max_joint_velocity_rad_s)
        acceleration = np.abs(velocity - np.asarray(dq, dtype=float)) / period_s
        _per_joint(envelope, "joint_acceleration", "rad_s2", acceleration, limits.max_joint_acceleration_rad_s2)
        waypoints = [goal]
        if stopping_rad_s2:
            waypoints.append(goal + velocity * np.abs(velocity) / (2.0 * stopping_rad_s2))
        path = envelope.check_joint_motion(q0, waypoints)
        for other in keep_clear:
            _check_clear(envelope, path, other)
    except MotionRefused as exc:
        raise StepRefused(exc, step) from None


def _per_joint(envelope: SafetyEnvelope, what: str, unit: str, values: np.ndarray, maxima: Sequence[float]) -> None:
    over = values > np.asarray(maxima) + 1e-9
    if over.any():
        j = int(np.argmax(over))
        raise MotionRefused(f"{envelope.arm_name}.step.{what}[{j}]_{unit}", round(float(values[j]), 4),
                            f"max_{what}_{unit}[{j}] {maxima[j]} (joint {j + 1})")


def _check_clear(envelope: SafetyEnvelope, path: np.ndarray, other: KeepClear) -> None:
    points = kinematics.body_points(kinematics.joint_frames(path)).reshape(-1, 3)
    gaps = np.sqrt(np.min(np.sum((points[:, None, :] - other.points[None, :, :]) ** 2, axis=2)))
    distance = float(gaps)
    if distance < other.min_distance_m:
        raise MotionRefused(f"{envelope.arm_name}+{other.other}.step.arm_distance_m", round(distance, 4),
                            f"min_arm_distance_m {other.min_distance_m} between the arms' links")
