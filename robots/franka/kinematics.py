"""FR3 kinematics in numpy: joint angles -> link frames, and a path of TCP poses -> joint angles.

The one place that knows the arm's geometry. The safety envelope checks every motion's links with
it, the arm reports poses computed from the *measured* joints with it (franky-sim's O_T_EE follows
the commanded joints), and rviz's TF for the arm's links comes from the same frames. No rclpy, no
URDF file needed: a lab's robot without franky-sim installed is checked the same way.

Frames follow the FR3 URDF of franka_description: `link0` is the base (the frame franky reports
O_T_EE in), each joint turns about its own z axis, `link8` is the flange 0.107 m past link7. The
default end effector is the Franka Hand's TCP: the flange turned -45 deg about z, then 0.1034 m
along z (what Desk reports as EE with its default end-effector settings, and franky-sim too).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from rpent.runtime.types import quat_from_matrix

JOINT_COUNT = 7


def rpy_matrix(roll: float, pitch: float, yaw: float) -> np.ndarray:
    """Rotation R = Rz(yaw) @ Ry(pitch) @ Rx(roll), the URDF convention."""
    cr, sr, cp, sp, cy, sy = (math.cos(roll), math.sin(roll), math.cos(pitch), math.sin(pitch),
                              math.cos(yaw), math.sin(yaw))
    return np.array([
        [cy * cp, cy * sp * sr - sy * cr, cy * sp * cr + sy * sr],
        [sy * cp, sy * sp * sr + cy * cr, sy * sp * cr - cy * sr],
        [-sp, cp * sr, cp * cr],
    ])


def transform(xyz: Sequence[float], rpy: Sequence[float] = (0.0, 0.0, 0.0)) -> np.ndarray:
    matrix = np.eye(4)
    matrix[:3, :3] = rpy_matrix(*rpy)
    matrix[:3, 3] = xyz
    return matrix


def axis_angle_matrix(axis: np.ndarray, angle: float) -> np.ndarray:
    x, y, z = axis
    c, s, t = math.cos(angle), math.sin(angle), 1.0 - math.cos(angle)
    return np.array([
        [t * x * x + c, t * x * y - s * z, t * x * z + s * y],
        [t * x * y + s * z, t * y * y + c, t * y * z - s * x],
        [t * x * z - s * y, t * y * z + s * x, t * z * z + c],
    ])


def quaternion_matrix(q: Sequence[float]) -> np.ndarray:
    """Rotation matrix of a quaternion [x, y, z, w] (normalised here)."""
    x, y, z, w = np.asarray(q, dtype=float) / np.linalg.norm(q)
    return np.array([
        [1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
        [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
        [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)],
    ])


def pose_matrix(position: Sequence[float], quaternion: Sequence[float]) -> np.ndarray:
    matrix = np.eye(4)
    matrix[:3, :3] = quaternion_matrix(quaternion)
    matrix[:3, 3] = position
    return matrix


def rotation_vector(rotation: np.ndarray) -> np.ndarray:
    """Axis * angle of a rotation matrix (angle in [0, pi])."""
    x, y, z, w = quat_from_matrix(rotation)
    vector = np.array([x, y, z])
    sin_half = float(np.linalg.norm(vector))
    if sin_half < 1e-12:
        return np.zeros(3)
    angle = 2.0 * math.atan2(sin_half, w)
    if angle > math.pi:  # q and -q: take the short way round
        angle -= 2.0 * math.pi
    return vector / sin_half * angle


# --- the FR3 chain ----------------------------------------------------------------------------------
# parent -> joint frame of joints 1..7 at q = 0 (xyz [m], rpy [rad]), from the FR3 URDF.
FR3_JOINT_ORIGINS: tuple[tuple[tuple[float, float, float], tuple[float, float, float]], ...] = (
    ((0.0, 0.0, 0.333), (0.0, 0.0, 0.0)),
    ((0.0, 0.0, 0.0), (-math.pi / 2, 0.0, 0.0)),
    ((0.0, -0.316, 0.0), (math.pi / 2, 0.0, 0.0)),
    ((0.0825, 0.0, 0.0), (math.pi / 2, 0.0, 0.0)),
    ((-0.0825, 0.384, 0.0), (-math.pi / 2, 0.0, 0.0)),
    ((0.0, 0.0, 0.0), (math.pi / 2, 0.0, 0.0)),
    ((0.088, 0.0, 0.0), (math.pi / 2, 0.0, 0.0)),
)
LINK7_TO_FLANGE = transform((0.0, 0.0, 0.107))
FLANGE_TO_HAND = transform((0.0, 0.0, 0.0), (0.0, 0.0, -math.pi / 4))
HAND_TO_TCP_M = 0.1034
FLANGE_TO_HAND_TCP = FLANGE_TO_HAND @ transform((0.0, 0.0, HAND_TO_TCP_M))

_ORIGINS = np.stack([transform(xyz, rpy) for xyz, rpy in FR3_JOINT_ORIGINS])


def joint_frames(q: np.ndarray) -> np.ndarray:
    """Frames of link1..link7 and the flange (link8) in the base frame: shape (N, 8, 4, 4) for q (N, 7)."""
    q = np.atleast_2d(np.asarray(q, dtype=float))
    if q.shape[-1] != JOINT_COUNT:
        raise ValueError(f"joints: expected {JOINT_COUNT} values per configuration, got {q.shape[-1]}")
    n = q.shape[0]
    c, s = np.cos(q), np.sin(q)
    frames = np.empty((n, JOINT_COUNT + 1, 4, 4))
    current = np.broadcast_to(np.eye(4), (n, 4, 4))
    for i in range(JOINT_COUNT):
        turn = np.zeros((n, 4, 4))
        turn[:, 0, 0], turn[:, 0, 1], turn[:, 1, 0], turn[:, 1, 1] = c[:, i], -s[:, i], s[:, i], c[:, i]
        turn[:, 2, 2] = turn[:, 3, 3] = 1.0
        current = current @ _ORIGINS[i] @ turn
        frames[:, i] = current
    frames[:, JOINT_COUNT] = current @ LINK7_TO_FLANGE
    return frames


def frames_of(q: Sequence[float]) -> np.ndarray:
    """joint_frames of one configuration, (8, 4, 4): the same chain without the batch bookkeeping,
    which dominates for one configuration (the inverse kinematics calls this in its inner loop)."""
    out = np.empty((JOINT_COUNT + 1, 4, 4))
    current = np.eye(4)
    for i in range(JOINT_COUNT):
        c, s = math.cos(q[i]), math.sin(q[i])
        m = current @ _ORIGINS[i]
        current = m.copy()
        current[:, 0] = c * m[:, 0] + s * m[:, 1]
        current[:, 1] = c * m[:, 1] - s * m[:, 0]
        out[i] = current
    out[JOINT_COUNT] = current @ LINK7_TO_FLANGE
    return out


def flange_pose(q: Sequence[float]) -> np.ndarray:
    """Base -> flange of one configuration, (4, 4)."""
    return frames_of([float(v) for v in q])[JOINT_COUNT]


def tcp_pose(q: Sequence[float], flange_to_tcp: np.ndarray = FLANGE_TO_HAND_TCP) -> np.ndarray:
    """Base -> end effector of one configuration, (4, 4)."""
    return flange_pose(q) @ flange_to_tcp


def tcp_jacobian(frames: np.ndarray, tcp: np.ndarray) -> np.ndarray:
    """Geometric Jacobian (6 x 7: linear, then angular, in the base frame) from one set of frames."""
    axes = frames[:JOINT_COUNT, :3, 2]
    lever = tcp[:3, 3] - frames[:JOINT_COUNT, :3, 3]
    # axis x lever, written out: np.cross costs more than the whole product for 7 rows
    linear = np.stack([
        axes[:, 1] * lever[:, 2] - axes[:, 2] * lever[:, 1],
        axes[:, 2] * lever[:, 0] - axes[:, 0] * lever[:, 2],
        axes[:, 0] * lever[:, 1] - axes[:, 1] * lever[:, 0],
    ])
    return np.vstack([linear, axes.T])


class UnreachablePose(ValueError):
    """The inverse kinematics found no joint configuration for a pose on the path."""

    def __init__(self, index: int, position_error_m: float, angle_error_rad: float) -> None:
        self.index = index
        self.position_error_m = position_error_m
        self.angle_error_rad = angle_error_rad
        super().__init__(f"pose {index} unreachable (residual {position_error_m:.4f} m, {angle_error_rad:.3f} rad)")


def track_path(
    q_start: Sequence[float],
    targets: Sequence[np.ndarray],
    flange_to_tcp: np.ndarray = FLANGE_TO_HAND_TCP,
    *,
    iterations: int = 8,
    tolerance_m: float = 1e-4,
    tolerance_rad: float = 1e-3,
    reach_tolerance_m: float = 2e-3,
    reach_tolerance_rad: float = 0.02,
) -> np.ndarray:
    """Joint configurations that follow `targets` (base -> TCP, closely spaced) from `q_start`.

    Damped least squares, each sample seeded with the previous one: the way the arm's own
    Cartesian controller (and franky-sim's) tracks a Cartesian path, so the configurations are
    the ones the arm will pass through, not just any solution. Raises UnreachablePose where the
    residual stays above the reach tolerance.
    """
    q = np.asarray(q_start, dtype=float).copy()
    path = np.empty((len(targets), JOINT_COUNT))
    damping = 1e-4 * np.eye(6)
    frames = frames_of(q)  # carried from sample to sample: the next one starts where this one ended
    for index, target in enumerate(targets):
        for _ in range(iterations):
            tcp = frames[JOINT_COUNT] @ flange_to_tcp
            error = np.concatenate([target[:3, 3] - tcp[:3, 3], rotation_vector(target[:3, :3] @ tcp[:3, :3].T)])
            if np.linalg.norm(error[:3]) < tolerance_m and np.linalg.norm(error[3:]) < tolerance_rad:
                break
            jac = tcp_jacobian(frames, tcp)
            q = q + jac.T @ np.linalg.solve(jac @ jac.T + damping, error)
            frames = frames_of(q)
        else:
            tcp = frames[JOINT_COUNT] @ flange_to_tcp
            position_error = float(np.linalg.norm(target[:3, 3] - tcp[:3, 3]))
            angle_error = float(np.linalg.norm(rotation_vector(target[:3, :3] @ tcp[:3, :3].T)))
            if position_error > reach_tolerance_m or angle_error > reach_tolerance_rad:
                raise UnreachablePose(index, position_error, angle_error)
        path[index] = q
    return path


# --- what the envelope checks ------------------------------------------------------------------------
# Points on each link's centre line (in that link's frame; index into joint_frames) and the radius of
# the link around them. Conservative round numbers for the FR3's castings: a lab with a different
# tool changes the hand points, not the arm's.
LINK_POINTS: tuple[tuple[int, tuple[float, float, float], float], ...] = (
    (1, (0.0, 0.0, 0.0), 0.07),        # shoulder (joints 1-2)
    (1, (0.0, -0.158, 0.0), 0.06),     # upper arm, middle
    (2, (0.0, 0.0, 0.0), 0.07),        # elbow, joint 3 side
    (3, (0.0, 0.0, 0.0), 0.07),        # elbow, joint 4
    (3, (-0.041, 0.192, 0.0), 0.06),   # forearm, middle
    (4, (0.0, 0.0, -0.12), 0.06),      # forearm, lower housing (link5's z runs elbow -> wrist)
    (5, (0.0, 0.0, 0.0), 0.07),        # wrist (joints 5-6)
    (6, (0.0, 0.0, 0.0), 0.06),        # joint 7
    (7, (0.0, 0.0, 0.0), 0.05),        # flange
)
# The Franka Hand in the hand frame (flange turned -45 deg; z towards the fingertips): body corners and
# the body's lower face (radius 0.01 m), and the fingertips at the widest opening. The pads reach about
# 1 cm past the TCP (measured in franky-sim: fingers on the table top with the TCP 1 cm above it).
FINGERTIP_PAST_TCP_M = 0.01
HAND_POINTS: tuple[tuple[float, float, float], ...] = (
    (0.03, 0.10, 0.0), (-0.03, 0.10, 0.0), (0.03, -0.10, 0.0), (-0.03, -0.10, 0.0),
    (0.03, 0.10, 0.065), (-0.03, 0.10, 0.065), (0.03, -0.10, 0.065), (-0.03, -0.10, 0.065),
    (0.01, 0.05, HAND_TO_TCP_M + FINGERTIP_PAST_TCP_M), (-0.01, 0.05, HAND_TO_TCP_M + FINGERTIP_PAST_TCP_M),
    (0.01, -0.05, HAND_TO_TCP_M + FINGERTIP_PAST_TCP_M), (-0.01, -0.05, HAND_TO_TCP_M + FINGERTIP_PAST_TCP_M),
)
_HAND_BODY_POINTS = 8

_LINK_INDEX = np.array([i for i, _, _ in LINK_POINTS])
_LINK_LOCAL = np.array([[*p, 1.0] for _, p, _ in LINK_POINTS])
_HAND_LOCAL = np.array([[*p, 1.0] for p in HAND_POINTS])
POINT_RADII_M = np.array(
    [r for _, _, r in LINK_POINTS] + [0.01] * _HAND_BODY_POINTS + [0.0] * (len(HAND_POINTS) - _HAND_BODY_POINTS)
)
POINT_NAMES = tuple(
    [f"link{i + 1}" if i < JOINT_COUNT else "flange" for i, _, _ in LINK_POINTS]
    + ["hand"] * _HAND_BODY_POINTS + ["fingertip"] * (len(HAND_POINTS) - _HAND_BODY_POINTS)
)


def body_points(frames: np.ndarray) -> np.ndarray:
    """Check points of the arm and hand (base frame) for frames (N, 8, 4, 4): shape (N, P, 3)."""
    links = np.einsum("npij,pj->npi", frames[:, _LINK_INDEX], _LINK_LOCAL)[..., :3]
    hand = (frames[:, JOINT_COUNT] @ FLANGE_TO_HAND) @ _HAND_LOCAL.T  # (N, 4, H)
    return np.concatenate([links, np.transpose(hand, (0, 2, 1))[..., :3]], axis=1)
