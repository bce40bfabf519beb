"""One streamed joint step (a policy's action at the control rate): shaped to the arm's limits, then
checked against its envelope, before franky sees it.

Shaping, as DROID's robot does: a step whose joint velocity exceeds a limit is scaled down uniformly
over all joints (the direction the policy asked for is kept) to the lowest of the configured cap
(`max_joint_velocity_rad_s`) and the FR3's position-dependent limit (slower near a joint's end of
travel: Franka's published FR3 limits, what libfranka's computeUpperLimitsJointVelocity computes),
so a checkpoint's 0.3-0.6 units (0.9-1.8 rad/s) run instead of ending the task. The step's
acceleration and jerk are not judged here: the motion that runs the step bounds them
(`step_dynamics`: franky's limits, lowered to `max_joint_acceleration_rad_s2`), so a step from rest
or a reversal in one step is smoothed by the robot, not refused.

The check refuses what is unsafe, and only that: a target, or the path the arm needs to come to rest
from the shaped velocity (it brakes by itself if no next step follows), outside the envelope (joint
margins, workspace box, tilt, table, the other arm); an action that is not 7 finite values, or lies
far outside DROID's [-1, 1] (robots.franka.policy.droid.FAR_OVER_UNITS). A refusal is a StepRefused:
the envelope's MotionRefused (limit, value, rule) plus the index of the step.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from robots.franka import kinematics
from robots.franka.safety import SafetyEnvelope
from robots.franka.safety_limits import FR3_JOINT_VELOCITY_MAX
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


# The FR3's joint travel and how its velocity limit falls towards each end (Franka's published FR3
# limits: the allowed speed towards an end is -offset + sqrt(2 * deceleration * distance to that end)).
_FR3_Q_MIN = np.array([-2.7501, -1.7918, -2.9065, -3.0481, -2.8101, 0.5445, -3.0196])
_FR3_Q_MAX = np.array([2.7501, 1.7918, 2.9065, -0.1458, 2.8101, 4.5205, 3.0196])
_FR3_V_MAX = np.array(FR3_JOINT_VELOCITY_MAX)
_FR3_V_OFFSET = np.array([0.30, 0.20, 0.20, 0.30, 0.35, 0.35, 0.35])
_FR3_DECELERATION = np.array([6.0, 2.585, 3.5, 4.0, 17.0, 5.5, 17.0])


def fr3_velocity_limits(q: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
    """(lower, upper) joint velocity limits of an FR3 at joints `q` [rad/s]: lower <= 0 <= upper."""
    q = np.asarray(q, dtype=float)
    upper = -_FR3_V_OFFSET + np.sqrt(np.maximum(0.0, 2 * _FR3_DECELERATION * (_FR3_Q_MAX - q)))
    lower = _FR3_V_OFFSET - np.sqrt(np.maximum(0.0, 2 * _FR3_DECELERATION * (q - _FR3_Q_MIN)))
    return np.clip(lower, -_FR3_V_MAX, 0.0), np.clip(upper, 0.0, _FR3_V_MAX)


@dataclass(frozen=True)
class ShapedStep:
    """A step as it runs: `velocity` held for one period from the measured joints, reaching `target`.

    `scale` is the factor the asked velocity was multiplied by (1.0: as asked); `bound` names the joint
    and the limit that set it (None when nothing did)."""

    target: np.ndarray
    velocity: np.ndarray
    scale: float
    bound: str | None


def shape_step(envelope: SafetyEnvelope, q: Sequence[float], target: Sequence[float], period_s: float) -> ShapedStep:
    """The step from `q` towards `target` in `period_s`, scaled uniformly so that no joint is faster than
    the lowest of the arm's cap and the FR3's limit at `q`. A target must be 7 finite values (else the
    check refuses it: see check_step)."""
    q0 = np.asarray(q, dtype=float)
    asked = (np.asarray(target, dtype=float) - q0) / period_s
    cap = np.asarray(envelope.limits.max_joint_velocity_rad_s, dtype=float)
    lower, upper = fr3_velocity_limits(q0)
    allowed = np.where(asked >= 0, np.minimum(cap, upper), np.minimum(cap, -lower))
    with np.errstate(divide="ignore", invalid="ignore"):
        ratios = np.where(np.abs(asked) > allowed, allowed / np.abs(asked), 1.0)
    j = int(np.argmin(ratios))
    scale = float(ratios[j])
    if scale >= 1.0:
        return ShapedStep(q0 + asked * period_s, asked, 1.0, None)
    which = "max_joint_velocity_rad_s" if allowed[j] >= cap[j] - 1e-12 else "the FR3's limit here"
    velocity = asked * scale
    return ShapedStep(q0 + velocity * period_s, velocity, scale, f"joint {j + 1}: {which} {allowed[j]:.3f} rad/s")


def rest_point(q: np.ndarray, velocity: np.ndarray, deceleration_rad_s2: float, jerk_rad_s3: float) -> np.ndarray:
    """Where joints at `q` moving at `velocity` come to rest under a brake of bounded deceleration and jerk
    (an upper bound on the distance: v^2 / 2a, plus v * a / 2j while the deceleration builds up)."""
    return q + velocity * (np.abs(velocity) / (2.0 * deceleration_rad_s2) + deceleration_rad_s2 / (2.0 * jerk_rad_s3))


def check_step(
    envelope: SafetyEnvelope,
    q: Sequence[float],
    dq: Sequence[float],
    step: ShapedStep,
    period_s: float,
    index: int,
    keep_clear: Sequence[KeepClear] = (),
    brake: tuple[float, float] | None = None,
) -> None:
    """Raise StepRefused if running `step` from `q` (measured velocity `dq`) is unsafe.

    With `brake` (the deceleration and jerk the arm brakes with when no next step follows), the path
    is checked on to where the arm comes to rest past the target, and to where it would come to rest
    from its present velocity (a step slower than the arm's motion brakes it first)."""
    q0 = np.asarray(q, dtype=float)
    goal = np.asarray(step.target, dtype=float)
    try:
        if goal.shape != (7,) or not np.all(np.isfinite(goal)):
            raise MotionRefused(f"{envelope.arm_name}.step.target", "not 7 finite values", "7 finite joint angles")
        waypoints = [goal]
        if brake is not None:
            waypoints.append(rest_point(goal, np.asarray(step.velocity, dtype=float), *brake))
        path = envelope.check_joint_motion(q0, waypoints)
        moving = np.asarray(dq, dtype=float)
        if brake is not None and np.max(np.abs(moving)) > 0.01:
            path = np.concatenate([path, envelope.check_joint_motion(q0, [rest_point(q0, moving, *brake)])])
        for other in keep_clear:
            _check_clear(envelope, path, other)
    except MotionRefused as exc:
        raise StepRefused(exc, index) from None


def check_action(envelope: SafetyEnvelope, action: Sequence[float], index: int, far_over: float) -> None:
    """Refuse a joint velocity action beyond `far_over` units: no DROID checkpoint sends one, and
    clipping it to 1 (as DROID's client does) would act on coerced input."""
    values = np.asarray(action, dtype=float)[:7]
    over = np.abs(values) > far_over
    if over.any():
        j = int(np.argmax(over))
        refusal = MotionRefused(f"{envelope.arm_name}.step.action[{j}]_units", round(float(values[j]), 4),
                                f"DROID joint velocities lie in [-1, 1] (a little beyond is clipped); beyond "
                                f"{far_over} a reply is refused, not clipped")
        raise StepRefused(refusal, index)


def _check_clear(envelope: SafetyEnvelope, path: np.ndarray, other: KeepClear) -> None:
    points = kinematics.body_points(kinematics.joint_frames(path)).reshape(-1, 3)
    gaps = np.sqrt(np.min(np.sum((points[:, None, :] - other.points[None, :, :]) ** 2, axis=2)))
    distance = float(gaps)
    if distance < other.min_distance_m:
        raise MotionRefused(f"{envelope.arm_name}+{other.other}.step.arm_distance_m", round(distance, 4),
                            f"min_arm_distance_m {other.min_distance_m} between the arms' links")
