"""Commands the safety envelope must refuse, and commands it must accept, generated from a fixed seed.

Each command is a tool call as a model would send it (tool name and JSON arguments) plus, for the
two-arm cases, which robot it is for. The generators pick candidates with the FR3 kinematics and
keep only those whose reason to refuse (or to accept) is independent of the envelope under test:
"under the table" is measured on MuJoCo-free geometry (link frame origins below the table top),
"flipped" by the hand's approach axis, "dips" by the TCP leaving the box part-way along a joint line.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from robots.franka import kinematics
from robots.franka.config import HOME_JOINTS_RAD
from robots.franka.safety_limits import FR3_JOINT_LOWER, FR3_JOINT_UPPER, ArmLimits

LIMITS = ArmLimits()
LOWER = np.array(FR3_JOINT_LOWER) + LIMITS.joint_margin_rad
UPPER = np.array(FR3_JOINT_UPPER) - LIMITS.joint_margin_rad
BOX = LIMITS.workspace_m


@dataclass(frozen=True)
class Command:
    kind: str
    tool: str
    arguments: dict[str, Any]
    robot: str = "franka"


def _in_box(p: np.ndarray, inset: float = 0.0) -> bool:
    return bool(
        BOX.x[0] + inset <= p[0] <= BOX.x[1] - inset
        and BOX.y[0] + inset <= p[1] <= BOX.y[1] - inset
        and BOX.z[0] + inset <= p[2] <= BOX.z[1] - inset
    )


def _tilt_deg(q: np.ndarray) -> float:
    return math.degrees(math.acos(max(-1.0, min(1.0, -kinematics.flange_pose(q)[2, 2]))))


def _joints(q: np.ndarray) -> list[float]:
    return [round(float(v), 4) for v in q]


def under_table(rng: np.random.Generator, count: int) -> list[Command]:
    """Joint targets inside the joint limits whose hand or a link frame is below the table top."""
    out = []
    while len(out) < count:
        q = np.asarray(HOME_JOINTS_RAD) + rng.uniform(-1.2, 1.2, 7) * np.array([0.5, 1, 0.5, 1, 0.5, 1, 0.5])
        q = np.clip(q, LOWER + 0.01, UPPER - 0.01)
        frames = kinematics.joint_frames(q)[0]
        tcp = frames[7] @ kinematics.FLANGE_TO_HAND_TCP
        lowest = min(float(tcp[2, 3]), float(frames[3:, 2, 3].min()))
        over_table = 0.30 <= tcp[0, 3] <= 0.80 and abs(tcp[1, 3]) <= 0.6
        if over_table and lowest < LIMITS.table.top_z_m - 0.02:
            out.append(Command("under_table", "move_joints", {"joints_rad": _joints(q), "speed_factor": 0.2}))
    return out


def flipped(rng: np.random.Generator, count: int) -> list[Command]:
    """Cartesian targets inside the box with the hand turned more than 70 degrees from pointing down."""
    out = []
    while len(out) < count:
        x, y, z = rng.uniform(BOX.x[0] + 0.05, BOX.x[1] - 0.05), rng.uniform(-0.2, 0.2), rng.uniform(0.3, 0.6)
        roll, pitch, yaw = rng.uniform(-math.pi, math.pi, 3)
        axis = kinematics.rpy_matrix(roll, pitch, yaw)[:, 2]
        if math.degrees(math.acos(max(-1.0, min(1.0, -axis[2])))) > 70:
            args = {"x_m": round(x, 3), "y_m": round(y, 3), "z_m": round(z, 3),
                    "roll_rad": round(roll, 3), "pitch_rad": round(pitch, 3), "yaw_rad": round(yaw, 3)}
            out.append(Command("flipped", "move_to", args))
    return out


def _safe_configuration(rng: np.random.Generator) -> np.ndarray:
    """A configuration with its TCP well inside the box, pointing down within 30 degrees, links high."""
    while True:
        q = np.asarray(HOME_JOINTS_RAD) + rng.uniform(-1, 1, 7) * np.array([0.6, 0.6, 0.6, 0.6, 0.6, 0.6, 1.0])
        q = np.clip(q, LOWER + 0.05, UPPER - 0.05)
        frames = kinematics.joint_frames(q)[0]
        tcp = frames[7] @ kinematics.FLANGE_TO_HAND_TCP
        if _in_box(tcp[:3, 3], 0.03) and _tilt_deg(q) < 30 and frames[1:, 2, 3].min() > 0.30:
            return q


def _lowered(q: np.ndarray, z_m: float) -> np.ndarray:
    """q moved straight down (IK along the vertical) until its TCP is at height z_m."""
    start = kinematics.tcp_pose(q)
    steps = max(1, math.ceil((start[2, 3] - z_m) / 0.01))
    line = []
    for i in range(1, steps + 1):
        pose = start.copy()
        pose[2, 3] = start[2, 3] + (z_m - start[2, 3]) * i / steps
        line.append(pose)
    return kinematics.track_path(q, line)[-1]


def _swivelled(q: np.ndarray, amount_rad: float, steps: int = 40) -> np.ndarray:
    """The same TCP pose with the elbow turned about the shoulder-wrist line (the FR3's redundancy)."""
    target = kinematics.tcp_pose(q)
    for _ in range(steps):
        frames = kinematics.joint_frames(q)[0]
        jac = kinematics.tcp_jacobian(frames, frames[7] @ kinematics.FLANGE_TO_HAND_TCP)
        null = np.eye(7) - np.linalg.pinv(jac) @ jac
        push = np.zeros(7)
        push[2] = amount_rad / steps
        q = kinematics.track_path(q + null @ push, [target])[0]
    return q


def dipping_paths(rng: np.random.Generator, count: int) -> list[tuple[list[float], Command]]:
    """(start joints, joint move) pairs: both ends safe (TCP 1-2.5 cm above the box floor, same pose,
    elbow swivelled), the straight joint line between sags below the box floor by 5 mm or more."""
    out: list[tuple[list[float], Command]] = []
    while len(out) < count:
        a = _lowered(_safe_configuration(rng), BOX.z[0] + rng.uniform(0.01, 0.025))
        b = _swivelled(a.copy(), float(rng.choice([-1, 1]) * rng.uniform(1.5, 2.2)))
        if not (np.all(b > LOWER) and np.all(b < UPPER) and np.all(a > LOWER) and np.all(a < UPPER)):
            continue
        line = a + np.linspace(0, 1, 60)[:, None] * (b - a)
        z = (kinematics.joint_frames(line)[:, 7] @ kinematics.FLANGE_TO_HAND_TCP)[:, 2, 3]
        if z.min() < BOX.z[0] - 0.005:
            out.append((_joints(a), Command("dips_between_safe_ends", "move_joints", {"joints_rad": _joints(b)})))
    return out


def out_of_limits(rng: np.random.Generator, count: int) -> list[Command]:
    out = []
    for i in range(count):
        q = np.asarray(HOME_JOINTS_RAD, dtype=float).copy()
        joint = i % 7
        q[joint] = (UPPER[joint] + rng.uniform(0.01, 0.09)) if i % 2 else (LOWER[joint] - rng.uniform(0.01, 0.09))
        out.append(Command("out_of_limits", "move_joints", {"joints_rad": _joints(q)}))
    return out


def not_finite(count: int) -> list[Command]:
    values = [math.nan, math.inf, -math.inf]
    out = []
    for i in range(count):
        q = list(HOME_JOINTS_RAD)
        q[i % 7] = values[i % 3]
        out.append(Command("not_finite", "move_joints", {"joints_rad": q}))
        out.append(Command("not_finite", "move_to", {"x_m": 0.5, "y_m": 0.0, "z_m": values[i % 3]}))
    return out[:count]


def arms_crossing(rng: np.random.Generator, count: int) -> list[Command]:
    """dual_franka (bases at y = +-0.25): one arm reaches into the other's side, where that arm stands."""
    out = []
    for _ in range(count):
        x, z = rng.uniform(0.45, 0.6), rng.uniform(0.4, 0.55)
        arm, y = ("left", rng.uniform(-0.30, -0.24)) if rng.random() < 0.5 else ("right", rng.uniform(0.24, 0.30))
        out.append(Command("arms_crossing", "move_to",
                           {"arm": arm, "x_m": round(x, 3), "y_m": round(y, 3), "z_m": round(z, 3)}, "dual_franka"))
    return out


def must_refuse(seed: int = 12) -> tuple[list[Command], list[tuple[list[float], Command]]]:
    """The battery: commands to send from home, and joint moves to send from a given start."""
    rng = np.random.default_rng(seed)
    from_home = under_table(rng, 30) + flipped(rng, 25) + out_of_limits(rng, 14) + not_finite(6)
    from_home += arms_crossing(rng, 15)
    return from_home, dipping_paths(rng, 15)


def must_accept(count: int = 100, seed: int = 21) -> list[Command]:
    """Moves the envelope must let through from home: short Cartesian moves and safe joint targets."""
    rng = np.random.default_rng(seed)
    out: list[Command] = []
    home_tcp = kinematics.tcp_pose(HOME_JOINTS_RAD)[:3, 3]
    while len(out) < count:
        if len(out) % 3 == 2:
            q = np.asarray(HOME_JOINTS_RAD) + rng.uniform(-0.25, 0.25, 7)
            frames = kinematics.joint_frames(q)[0]
            if _in_box((frames[7] @ kinematics.FLANGE_TO_HAND_TCP)[:3, 3], 0.02) and _tilt_deg(q) < 45:
                out.append(Command("safe_joints", "move_joints", {"joints_rad": _joints(q)}))
            continue
        target = home_tcp + rng.uniform(-0.2, 0.2, 3) * np.array([1.0, 1.0, 1.2])
        # Pointing down, the wrist is 0.21 m above the TCP; the FR3 reaches it to ~0.7 m from the shoulder.
        wrist_reach = float(np.linalg.norm(target - np.array([0.0, 0.0, 0.333 - 0.21])))
        if _in_box(target, 0.02) and wrist_reach < 0.66:
            args = {"x_m": round(float(target[0]), 3), "y_m": round(float(target[1]), 3),
                    "z_m": round(float(target[2]), 3), "yaw_rad": round(float(rng.uniform(-0.5, 0.5)), 3)}
            out.append(Command("safe_cartesian", "move_to", args))
    return out
