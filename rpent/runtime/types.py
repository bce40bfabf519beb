"""Value types shared by every runtime: poses, arm and gripper states.

All lengths are metres, all angles radians, quaternions are [x, y, z, w] (franky's order).
Values are immutable and convert to plain JSON-friendly dicts, so the same object can travel
through a tool result, an RPC frame or a ROS message without a second definition.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

Vec3 = tuple[float, float, float]
Quat = tuple[float, float, float, float]


def _normalised(q: Sequence[float]) -> Quat:
    if len(q) != 4:
        raise ValueError(f"quaternion must have 4 components [x, y, z, w], got {len(q)}")
    norm = math.sqrt(sum(float(c) * float(c) for c in q))
    if not math.isfinite(norm) or norm < 1e-9:
        raise ValueError(f"quaternion must be finite and non-zero, got {list(q)}")
    x, y, z, w = (float(c) / norm for c in q)
    # q and -q are the same rotation: pick one sign so equal rotations serialise alike. A
    # tolerance keeps w ~ 0 (e.g. a gripper pointing straight down) from flipping on noise.
    lead = w if abs(w) > 1e-6 else next((c for c in (x, y, z) if abs(c) > 1e-6), 1.0)
    if lead < 0:
        x, y, z, w = -x, -y, -z, -w
    return (x, y, z, w)


def quat_from_rpy(roll: float, pitch: float, yaw: float) -> Quat:
    """Quaternion [x, y, z, w] of the rotation R = Rz(yaw) @ Ry(pitch) @ Rx(roll)."""
    cr, sr = math.cos(roll / 2), math.sin(roll / 2)
    cp, sp = math.cos(pitch / 2), math.sin(pitch / 2)
    cy, sy = math.cos(yaw / 2), math.sin(yaw / 2)
    return _normalised(
        (
            sr * cp * cy - cr * sp * sy,
            cr * sp * cy + sr * cp * sy,
            cr * cp * sy - sr * sp * cy,
            cr * cp * cy + sr * sp * sy,
        )
    )


def rpy_from_quat(q: Sequence[float]) -> Vec3:
    """Roll, pitch, yaw (fixed-axis x-y-z, i.e. R = Rz @ Ry @ Rx) of a quaternion [x, y, z, w]."""
    x, y, z, w = _normalised(q)
    roll = math.atan2(2 * (w * x + y * z), 1 - 2 * (x * x + y * y))
    sin_pitch = max(-1.0, min(1.0, 2 * (w * y - z * x)))
    pitch = math.asin(sin_pitch)
    yaw = math.atan2(2 * (w * z + x * y), 1 - 2 * (y * y + z * z))
    return (roll, pitch, yaw)


def quat_multiply(a: Sequence[float], b: Sequence[float]) -> Quat:
    """Hamilton product a * b (apply b first, then a) of quaternions [x, y, z, w]."""
    ax, ay, az, aw = a
    bx, by, bz, bw = b
    return _normalised(
        (
            aw * bx + ax * bw + ay * bz - az * by,
            aw * by - ax * bz + ay * bw + az * bx,
            aw * bz + ax * by - ay * bx + az * bw,
            aw * bw - ax * bx - ay * by - az * bz,
        )
    )


def quat_angle(a: Sequence[float], b: Sequence[float]) -> float:
    """Smallest rotation angle in radians between two orientations."""
    qa, qb = _normalised(a), _normalised(b)
    dot = abs(sum(x * y for x, y in zip(qa, qb, strict=False)))
    return 2 * math.acos(min(1.0, dot))


def quat_from_matrix(rotation: Any) -> Quat:
    """Unit quaternion [x, y, z, w] of a 3x3 rotation matrix (anything indexed `m[i, j]`, e.g. numpy),
    by Shepperd's method: stable for any angle. The sign is left as computed (Pose picks one)."""
    m = rotation
    trace = m[0, 0] + m[1, 1] + m[2, 2]
    if trace > 0:
        s = 2.0 * math.sqrt(trace + 1.0)
        q = ((m[2, 1] - m[1, 2]) / s, (m[0, 2] - m[2, 0]) / s, (m[1, 0] - m[0, 1]) / s, 0.25 * s)
    elif m[0, 0] > m[1, 1] and m[0, 0] > m[2, 2]:
        s = 2.0 * math.sqrt(1.0 + m[0, 0] - m[1, 1] - m[2, 2])
        q = (0.25 * s, (m[0, 1] + m[1, 0]) / s, (m[0, 2] + m[2, 0]) / s, (m[2, 1] - m[1, 2]) / s)
    elif m[1, 1] > m[2, 2]:
        s = 2.0 * math.sqrt(1.0 + m[1, 1] - m[0, 0] - m[2, 2])
        q = ((m[0, 1] + m[1, 0]) / s, 0.25 * s, (m[1, 2] + m[2, 1]) / s, (m[0, 2] - m[2, 0]) / s)
    else:
        s = 2.0 * math.sqrt(1.0 + m[2, 2] - m[0, 0] - m[1, 1])
        q = ((m[0, 2] + m[2, 0]) / s, (m[1, 2] + m[2, 1]) / s, 0.25 * s, (m[1, 0] - m[0, 1]) / s)
    norm = math.sqrt(sum(c * c for c in q))
    return (q[0] / norm, q[1] / norm, q[2] / norm, q[3] / norm)


@dataclass(frozen=True)
class Pose:
    """A rigid pose: position [m] and orientation quaternion [x, y, z, w], in some named frame."""

    position: Vec3
    quaternion: Quat = (0.0, 0.0, 0.0, 1.0)

    def __post_init__(self) -> None:
        if len(self.position) != 3:
            raise ValueError(f"position must have 3 components, got {len(self.position)}")
        pos = tuple(float(c) for c in self.position)
        if not all(math.isfinite(c) for c in pos):
            raise ValueError(f"position must be finite, got {list(pos)}")
        object.__setattr__(self, "position", pos)
        object.__setattr__(self, "quaternion", _normalised(self.quaternion))

    @classmethod
    def from_rpy(cls, position: Sequence[float], rpy: Sequence[float]) -> Pose:
        if len(rpy) != 3:
            raise ValueError(f"rpy must have 3 components [roll, pitch, yaw], got {len(rpy)}")
        return cls(tuple(position), quat_from_rpy(*rpy))  # type: ignore[arg-type]

    @property
    def rpy(self) -> Vec3:
        return rpy_from_quat(self.quaternion)

    def translated(self, delta: Sequence[float]) -> Pose:
        """The same orientation, moved by `delta` metres in the frame this pose is expressed in."""
        x, y, z = self.position
        return Pose((x + delta[0], y + delta[1], z + delta[2]), self.quaternion)

    def rotated(self, rotation: Sequence[float]) -> Pose:
        """This pose with `rotation` (a quaternion) applied about the parent frame's axes."""
        return Pose(self.position, quat_multiply(rotation, self.quaternion))

    def distance_to(self, other: Pose) -> float:
        return math.dist(self.position, other.position)

    def angle_to(self, other: Pose) -> float:
        return quat_angle(self.quaternion, other.quaternion)

    def to_dict(self) -> dict[str, list[float]]:
        return {
            "position": [round(c, 6) for c in self.position],
            "quaternion": [round(c, 6) for c in self.quaternion],
            "rpy": [round(c, 6) for c in self.rpy],
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Pose:
        if "quaternion" in data:
            return cls(tuple(data["position"]), tuple(data["quaternion"]))
        return cls.from_rpy(data["position"], data.get("rpy", (0.0, 0.0, 0.0)))


@dataclass(frozen=True)
class ArmState:
    """One snapshot of an arm: end-effector pose in the robot base frame and joint readings."""

    pose: Pose
    joints: tuple[float, ...]
    joint_velocities: tuple[float, ...] = ()
    moving: bool = False
    has_errors: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "ee_pose": self.pose.to_dict(),
            "joints_rad": [round(q, 6) for q in self.joints],
            "joint_velocities_rad_s": [round(v, 5) for v in self.joint_velocities],
            "moving": self.moving,
            "has_errors": self.has_errors,
        }


@dataclass(frozen=True)
class GripperState:
    """Opening width of a parallel gripper [m] and whether it holds something."""

    width_m: float
    max_width_m: float
    grasped: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "width_m": round(self.width_m, 5),
            "max_width_m": round(self.max_width_m, 5),
            "grasped": self.grasped,
        }


@dataclass(frozen=True)
class MotionOutcome:
    """How a started motion ended: reached its target, was stopped on request, or timed out."""

    finished: bool
    stopped: bool = False
    timed_out: bool = False
    detail: str = ""
    extra: dict[str, Any] = field(default_factory=dict)
