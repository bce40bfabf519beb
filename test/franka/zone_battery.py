"""Keep-out zones the envelope must honour, generated from a fixed seed (S1-style, as battery.py).

Each case is a tool call from a start configuration and a zone placed by plain geometry of the hand's
straight-line (or joint-line) path, measured independently of the envelope under test:
- `in_target`: a small box around the target's TCP: the hand ends inside it;
- `across_path`: a small box around the TCP half-way along the path, at least 12 cm from either end:
  the hand passes through it and the refusal must name a point of the path, not the target;
- `beside_path`: a short post on the table, 20 cm to the side of the whole TCP path and lower than the
  path: the motion must run (the hand's half-width is at most 10.4 cm, the post's radius 2 cm).
Candidates the envelope refuses without any zone (workspace, reach, tilt) are not cases of zones.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np

from robots.franka import kinematics
from robots.franka.config import HOME_JOINTS_RAD
from robots.franka.keep_out import KeepOutZone
from robots.franka.safety import SafetyEnvelope
from robots.franka.safety_limits import ArmLimits
from rpent.runtime.arm import MotionRefused
from rpent.runtime.types import Pose

HOME = np.asarray(HOME_JOINTS_RAD)
TABLE_TOP_M = ArmLimits().table.top_z_m
BESIDE_M = 0.20
POST_RADIUS_M = 0.02


@dataclass(frozen=True)
class ZoneCase:
    kind: str
    tool: str
    arguments: dict[str, Any]
    zone: KeepOutZone
    start: tuple[float, ...] = tuple(HOME_JOINTS_RAD)

    @property
    def refused(self) -> bool:
        return self.kind != "beside_path"


def box_around(name: str, point: np.ndarray, half_m: float = 0.02) -> KeepOutZone:
    x, y, z = (float(v) for v in point)
    return KeepOutZone.model_validate({"name": name, "box": {
        "x_m": [x - half_m, x + half_m], "y_m": [y - half_m, y + half_m], "z_m": [z - half_m, z + half_m]}})


def post_beside(name: str, start: np.ndarray, end: np.ndarray, side: float) -> KeepOutZone:
    """A post on the table BESIDE_M to one side of the TCP line start -> end (horizontally), its top 5 cm
    below the line's lowest point."""
    mid = (start + end) / 2
    along = end[:2] - start[:2]
    normal = np.array([-along[1], along[0]]) / max(float(np.linalg.norm(along)), 1e-9)
    if float(np.linalg.norm(along)) < 1e-6:
        normal = np.array([0.0, 1.0])
    x, y = mid[:2] + side * BESIDE_M * normal
    top = min(float(start[2]), float(end[2])) - 0.05
    return KeepOutZone.model_validate({"name": name, "cylinder": {
        "center_xy_m": [float(x), float(y)], "radius_m": POST_RADIUS_M, "z_m": [TABLE_TOP_M, top]}})


def _far_at_start(case: ZoneCase) -> bool:
    """The zone starts clear of the arm: 12 cm from every joint, the flange and the TCP (farther than any
    link's radius with the margin and the zone's half-diagonal), and a target's zone 17 cm (farther than
    the hand's half-width with its margin, 15.4 cm, so its refusal is the target's doing). An arm that
    starts too close may only move away: a separate rule."""
    frames = kinematics.joint_frames(np.asarray(case.start)[None])[0]
    points = np.vstack([frames[1:, :3, 3], _tcp(np.asarray(case.start))[None]])
    return bool(np.min(case.zone.signed_distance(points)) > (0.17 if case.kind == "in_target" else 0.12))


def _clear_of(post: KeepOutZone, tcp_line: np.ndarray) -> bool:
    """The TCP stays BESIDE_M - 3 cm to the side of the post and 5 cm above its top all along."""
    side = np.linalg.norm(tcp_line[:, :2] - np.asarray(post.cylinder.center_xy_m), axis=1)
    return bool(side.min() >= BESIDE_M - 0.03 and tcp_line[:, 2].min() - 0.05 >= post.cylinder.z_m[1] - 1e-9)


def _tcp(q: np.ndarray) -> np.ndarray:
    return kinematics.tcp_pose(q)[:3, 3]


def _runs_without_zones(case: ZoneCase) -> bool:
    try:
        check(SafetyEnvelope(ArmLimits(), "arm"), case)
    except MotionRefused:
        return False
    return True


def check(envelope: SafetyEnvelope, case: ZoneCase) -> np.ndarray:
    """What the Franka tools ask of the envelope for this case (orientation kept, pointing down)."""
    start = np.asarray(case.start)
    args = case.arguments
    if case.tool in ("move_joints", "home"):
        return envelope.check_joint_motion(start, [args.get("joints_rad", HOME_JOINTS_RAD)])
    current = envelope.tcp_pose(start)
    if case.tool == "move_by":
        position = np.asarray(current.position) + np.array([args.get("dx_m", 0.0), args.get("dy_m", 0.0),
                                                            args.get("dz_m", 0.0)])
    else:
        position = np.array([args["x_m"], args["y_m"], args["z_m"]])
    return envelope.check_cartesian_motion(start, [Pose(tuple(position), current.quaternion)])


def _cartesian(rng: np.random.Generator) -> tuple[str, dict[str, Any], np.ndarray]:
    home = _tcp(HOME)
    if rng.random() < 0.5:
        target = home + rng.uniform(-0.25, 0.25, 3) * np.array([1.0, 1.2, 1.0])
        args = {"x_m": round(float(target[0]), 3), "y_m": round(float(target[1]), 3), "z_m": round(float(target[2]), 3)}
        return "move_to", args, np.array([args["x_m"], args["y_m"], args["z_m"]])
    d = rng.uniform(-0.1, 0.1, 3)
    d *= min(1.0, 0.1 / float(np.linalg.norm(d)))  # max_step_m
    args = {"dx_m": round(float(d[0]), 3), "dy_m": round(float(d[1]), 3), "dz_m": round(float(d[2]), 3)}
    return "move_by", args, home + np.array([args["dx_m"], args["dy_m"], args["dz_m"]])


@functools.cache
def cases(seed: int = 33, per_kind: int = 12) -> tuple[ZoneCase, ...]:
    """`per_kind` cases of each kind for Cartesian moves (move_to, move_by), joint moves and home
    (generated once per session: about a second)."""
    rng = np.random.default_rng(seed)
    out: list[ZoneCase] = []
    counts: dict[tuple[str, str], int] = {}

    def add(case: ZoneCase, family: str) -> None:
        key = (case.kind, family)
        if counts.get(key, 0) < per_kind and _far_at_start(case) and _runs_without_zones(case):
            counts[key] = counts.get(key, 0) + 1
            out.append(case)

    attempts = 0
    while min((counts.get((k, f), 0) for k in ("in_target", "across_path", "beside_path")
               for f in ("cartesian", "joints", "home")), default=0) < per_kind:
        attempts += 1
        assert attempts < 20000, f"zone battery: too few candidates {counts}"
        start_q = HOME
        family = ("cartesian", "joints", "home")[attempts % 3]
        if family == "cartesian":
            tool, args, end = _cartesian(rng)
            start, mid = _tcp(HOME), (_tcp(HOME) + end) / 2
            tcp_line = start + np.linspace(0, 1, 21)[:, None] * (end - start)
        else:
            q = HOME + rng.uniform(-0.3, 0.3, 7) * np.array([1, 1, 1, 1, 1, 1, 0.5])
            if family == "joints":
                tool, args, start_q, goal = "move_joints", {"joints_rad": [round(float(v), 4) for v in q]}, HOME, None
            else:  # home from q: the joint line q -> home
                tool, args, start_q, goal = "home", {}, q, HOME
            target_q = np.asarray(args["joints_rad"]) if goal is None else goal
            start, end = _tcp(start_q), _tcp(target_q)
            mid = _tcp((start_q + target_q) / 2)
            tcp_line = np.array([_tcp(start_q + f * (target_q - start_q)) for f in np.linspace(0, 1, 21)])
        length = float(np.linalg.norm(end - start))
        start_t = tuple(float(v) for v in start_q)
        add(ZoneCase("in_target", tool, args, box_around("at_target", end), start_t), family)
        if length > 0.24 and min(np.linalg.norm(mid - start), np.linalg.norm(mid - end)) > 0.12:
            add(ZoneCase("across_path", tool, args, box_around("on_the_way", mid), start_t), family)
        if length > 0.05 and min(start[2], end[2]) - 0.05 > TABLE_TOP_M + 0.02:
            post = post_beside("next_to_it", start, end, 1.0 if rng.random() < 0.5 else -1.0)
            if _clear_of(post, tcp_line):
                add(ZoneCase("beside_path", tool, args, post, start_t), family)
    return tuple(out)


@contextmanager
def zones_on(arm: Any, zones: list[KeepOutZone]) -> Iterator[None]:
    """The arm's envelope with these keep-out zones (instead of its own) while the block runs."""
    own = arm.envelope
    arm.envelope = SafetyEnvelope(own.limits, own.arm_name, base_xyz_m=own.base_xyz_m,
                                  flange_to_tcp=own.flange_to_tcp, keep_out=zones)
    try:
        yield
    finally:
        arm.envelope = own
