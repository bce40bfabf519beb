"""The safety envelope: limits every Franka command is checked against before franky sees it.

A motion is checked whole: its target and the path franky will run between the current pose and
it (sampled every `path_step_m` / `path_step_rad`, along the Cartesian line for Cartesian motions,
along the joint-space line for joint motions), for every configuration on the way: joints inside
their limits with margin, the TCP inside the workspace box and within `max_tilt_deg` of pointing
down, every link and the hand above the table and the floor and out of every keep-out zone
(robots.franka.keep_out). Cartesian paths are turned into
joint configurations the way the arm's own controller tracks them (robots.franka.kinematics), so
the links of a Cartesian motion are checked too, and a target no configuration reaches is refused.

The limits are robots.franka.safety_limits' (`ArmLimits`); `load_safety_config` reads them from
YAML (config/franka_safety.yaml), defaults with per-arm overrides, and builds each arm's envelope.
Arms moving together keep their distance: robots.franka.arm_clearance.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import yaml
from pydantic import BaseModel, ConfigDict, ValidationError, field_validator

from robots.franka import kinematics
from robots.franka.keep_out import CHAIN_NAMES, KeepOutZone, check_names, penetration, zone_points
from robots.franka.safety_limits import ArmLimits
from rpent.rule_words import pydantic_rule
from rpent.runtime.arm import MotionRefused
from rpent.runtime.types import Pose, quat_from_matrix


class SafetyEnvelope:
    """Checks commands for one arm against its limits; raises MotionRefused naming limit and value."""

    def __init__(
        self,
        limits: ArmLimits | None = None,
        arm_name: str = "arm",
        *,
        base_xyz_m: Sequence[float] = (0.0, 0.0, 0.0),
        flange_to_tcp: np.ndarray = kinematics.FLANGE_TO_HAND_TCP,
        keep_out: Sequence[KeepOutZone] = (),
    ) -> None:
        self.limits = limits or ArmLimits()
        self.arm_name = arm_name
        self.keep_out = tuple(zone for zone in keep_out if zone.applies_to(arm_name))
        self.base_xyz_m = np.asarray(base_xyz_m, dtype=float)
        self.flange_to_tcp = np.asarray(flange_to_tcp, dtype=float)
        self._lower = np.asarray(self.limits.joint_lower_rad) + self.limits.joint_margin_rad
        self._upper = np.asarray(self.limits.joint_upper_rad) - self.limits.joint_margin_rad

    def with_tcp(self, flange_to_tcp: np.ndarray) -> SafetyEnvelope:
        """The same envelope for an arm whose end effector sits at `flange_to_tcp` from the flange."""
        return SafetyEnvelope(self.limits, self.arm_name, base_xyz_m=self.base_xyz_m, flange_to_tcp=flange_to_tcp,
                              keep_out=self.keep_out)

    def _refuse(self, limit: str, value: object, rule: str) -> MotionRefused:
        return MotionRefused(f"{self.arm_name}.{limit}", value, rule)

    # --- single poses and joint vectors ----------------------------------------------------------
    def check_pose(self, pose: Pose, what: str = "target") -> None:
        box = self.limits.workspace_m
        for axis, value, (lo, hi) in zip("xyz", pose.position, (box.x, box.y, box.z), strict=False):
            if not lo <= value <= hi:
                raise self._refuse(f"{what}.{axis}_m", round(value, 4), f"workspace_m.{axis} [{lo}, {hi}]")
        # The shoulder sits 0.333 m above the base; farther than the reach the arm is stretched out.
        reach = math.dist(pose.position, (0.0, 0.0, 0.333))
        if reach > self.limits.max_reach_m:
            raise self._refuse(f"{what}.reach_m", round(reach, 4), f"max_reach_m {self.limits.max_reach_m}")
        # The hand's approach axis is the flange's z, whatever end-effector frame the arm reports.
        flange = kinematics.quaternion_matrix(pose.quaternion) @ self.flange_to_tcp[:3, :3].T
        tilt = _tilt_deg(flange[None])[0]
        if tilt > self.limits.max_tilt_deg:
            raise self._refuse(f"{what}.tilt_deg", round(tilt, 1), self._tilt_rule())

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

    # --- whole motions -------------------------------------------------------------------------------
    def check_joint_motion(self, q_start: Sequence[float], waypoints: Sequence[Sequence[float]]) -> np.ndarray:
        """Check joint waypoints and the joint-space path to them; returns the sampled configurations."""
        names = _waypoint_names("joints", len(waypoints))
        previous = np.asarray(q_start, dtype=float)
        samples, labels = [], []
        for name, waypoint in zip(names, waypoints, strict=True):
            self.check_joints([float(q) for q in waypoint], name)
            target = np.asarray(waypoint, dtype=float)
            count = max(1, math.ceil(float(np.max(np.abs(target - previous))) / self.limits.path_step_rad))
            fractions = np.arange(1, count + 1) / count
            samples.append(previous + fractions[:, None] * (target - previous))
            labels += [(name, f) for f in fractions]
            previous = target
        path = np.concatenate(samples)
        self.check_configurations(np.asarray(q_start, dtype=float), path, labels)
        return path

    def check_cartesian_motion(self, q_start: Sequence[float], waypoints: Sequence[Pose]) -> np.ndarray:
        """Check Cartesian waypoints and the straight-line path to them; returns sampled configurations."""
        names = _waypoint_names("target", len(waypoints))
        for name, waypoint in zip(names, waypoints, strict=True):
            self.check_pose(waypoint, name)
        q0 = np.asarray(q_start, dtype=float)
        previous = kinematics.flange_pose(q0) @ self.flange_to_tcp
        poses, labels = [], []
        for name, waypoint in zip(names, waypoints, strict=True):
            target = kinematics.pose_matrix(waypoint.position, waypoint.quaternion)
            segment, fractions = self._cartesian_samples(previous, target)
            poses += segment
            labels += [(name, f) for f in fractions]
            previous = target
        path = self._track(q0, poses, labels)
        self.check_configurations(q0, path, labels)
        return path

    def _cartesian_samples(self, start: np.ndarray, target: np.ndarray) -> tuple[list[np.ndarray], np.ndarray]:
        """Poses along the line start -> target (positions linear, orientation slerped)."""
        distance = float(np.linalg.norm(target[:3, 3] - start[:3, 3]))
        turn = kinematics.rotation_vector(target[:3, :3] @ start[:3, :3].T)
        angle = float(np.linalg.norm(turn))
        count = max(1, math.ceil(distance / self.limits.path_step_m), math.ceil(angle / self.limits.path_step_rad))
        fractions = np.arange(1, count + 1) / count
        poses = []
        for f in fractions:
            pose = np.eye(4)
            pose[:3, 3] = start[:3, 3] + f * (target[:3, 3] - start[:3, 3])
            pose[:3, :3] = _rotation_about(turn, f) @ start[:3, :3]
            poses.append(pose)
        poses[-1] = target
        return poses, fractions

    def _track(self, q0: np.ndarray, poses: list[np.ndarray], labels: list[tuple[str, float]]) -> np.ndarray:
        """Joint configurations along Cartesian samples: IK every few samples, joint-interpolated between.

        IK every 4th sample (4 cm / 0.2 rad) keeps the check within its budget; where that loses track,
        every sample is solved before a pose is called unreachable.
        """
        for stride, iterations in ((4, 8), (1, 30)):
            keys = sorted({*range(stride - 1, len(poses), stride), len(poses) - 1})
            try:
                solved = kinematics.track_path(q0, [poses[k] for k in keys], self.flange_to_tcp, iterations=iterations)
                break
            except kinematics.UnreachablePose as exc:
                failure = (keys[exc.index], exc)
        else:
            index, exc = failure
            raise self._refuse(
                f"{_where(*labels[index])}.reachable_m",
                round(exc.position_error_m, 4),
                "a joint configuration of the arm must reach every pose on the path (inverse kinematics)",
            ) from None
        path = np.empty((len(poses), 7))
        previous_index, previous_q = -1, q0
        for key, q in zip(keys, solved, strict=True):
            span = key - previous_index
            for step in range(1, span + 1):
                path[previous_index + step] = previous_q + (q - previous_q) * step / span
            previous_index, previous_q = key, q
        return path

    def check_configurations(self, q_start: np.ndarray, path: np.ndarray, labels: list[tuple[str, float]]) -> None:
        """Every configuration of a path: joint limits, TCP box and tilt, links above table and floor and
        out of the keep-out zones."""
        if not np.all(np.isfinite(path)):
            k = int(np.argmax(~np.all(np.isfinite(path), axis=1)))
            raise self._refuse(f"{_where(*labels[k])}.joints_rad", "not finite", "every joint value must be finite")
        low = path < self._lower - 1e-9
        high = path > self._upper + 1e-9
        if low.any() or high.any():
            k, j = np.argwhere(low | high)[0]
            lo, hi = self.limits.joint_lower_rad[j], self.limits.joint_upper_rad[j]
            raise self._refuse(
                f"{_where(*labels[k])}.joints[{j}]_rad", round(float(path[k, j]), 4),
                f"joint {j + 1} limits [{lo}, {hi}] with margin {self.limits.joint_margin_rad}",
            )
        frames = kinematics.joint_frames(np.vstack([q_start[None], path]))
        tcp = frames[:, 7] @ self.flange_to_tcp
        self._check_box(tcp[:, :3, 3], labels)
        self._check_tilt(frames[:, 7, :3, :3], labels)
        self._check_clear_of_table(self.base_xyz_m + kinematics.body_points(frames[1:]), labels)
        self._check_keep_out(frames, labels)

    def _check_box(self, positions: np.ndarray, labels: list[tuple[str, float]]) -> None:
        box = self.limits.workspace_m
        lo = np.array([box.x[0], box.y[0], box.z[0]])
        hi = np.array([box.x[1], box.y[1], box.z[1]])
        excess = np.max(np.maximum(lo - positions, positions - hi), axis=1)
        k = _first_violation(excess, 0.0, 1e-3)
        if k is not None:
            axis = int(np.argmax(np.maximum(lo - positions[k + 1], positions[k + 1] - hi)))
            bounds = (box.x, box.y, box.z)[axis]
            raise self._refuse(
                f"{_where(*labels[k])}.{'xyz'[axis]}_m", round(float(positions[k + 1, axis]), 4),
                f"workspace_m.{'xyz'[axis]} [{bounds[0]}, {bounds[1]}] along the whole path",
            )

    def _check_tilt(self, rotations: np.ndarray, labels: list[tuple[str, float]]) -> None:
        tilt = _tilt_deg(rotations)
        k = _first_violation(tilt, self.limits.max_tilt_deg, 0.1)
        if k is not None:
            raise self._refuse(f"{_where(*labels[k])}.tilt_deg", round(float(tilt[k + 1]), 1), self._tilt_rule())

    def _tilt_rule(self) -> str:
        return f"max_tilt_deg {self.limits.max_tilt_deg} (angle between the gripper's approach axis and straight down)"

    def _check_clear_of_table(self, points: np.ndarray, labels: list[tuple[str, float]]) -> None:
        """points (N, P, 3) in the world frame; each has the radius of its link."""
        radii = kinematics.POINT_RADII_M
        table, margin = self.limits.table, self.limits.table_margin_m
        bottom = points[..., 2] - radii
        over_table = (
            (points[..., 0] >= table.x_m[0] - radii) & (points[..., 0] <= table.x_m[1] + radii)
            & (points[..., 1] >= table.y_m[0] - radii) & (points[..., 1] <= table.y_m[1] + radii)
        )
        for name, floor, mask in (
            ("table", table.top_z_m + margin, over_table),
            ("floor", self.limits.floor_z_m + margin, np.ones_like(over_table)),
        ):
            low = mask & (bottom < floor - 1e-9)
            if low.any():
                k, p = np.argwhere(low)[0]
                raise self._refuse(
                    f"{_where(*labels[k])}.{kinematics.POINT_NAMES[p]}.z_m", round(float(bottom[k, p]), 4),
                    f"{name} at z {floor - margin} m + margin {margin} m (every link and the hand stay above it)",
                )

    def _check_keep_out(self, frames: np.ndarray, labels: list[tuple[str, float]]) -> None:
        """frames: the start and the path. An arm that starts too close to a zone (a zone added beside
        it) may move away: only getting closer than at the start is refused."""
        if not self.keep_out:
            return
        points = self.base_xyz_m + zone_points(frames)
        margin = self.limits.keep_out_margin_m
        for zone in self.keep_out:
            depth = penetration(zone, points, margin)
            k = _first_violation(np.max(depth, axis=1), 0.0, 1e-3)
            if k is not None:
                c = int(np.argmax(depth[k + 1]))
                gap = margin - float(depth[k + 1, c])  # from the link's surface to the zone; negative inside
                raise self._refuse(
                    f"{_where(*labels[k])}.{CHAIN_NAMES[c]}.keep_out_m", round(gap, 4),
                    f"{zone.describe()} + margin {margin} m (every link and the hand stay out of it)",
                )

    def world_points(self, path: np.ndarray) -> np.ndarray:
        """Check points (N, P, 3) of the arm's links and hand in the world frame."""
        return self.base_xyz_m + kinematics.body_points(kinematics.joint_frames(path))

    def tcp_pose(self, joints: Sequence[float]) -> Pose:
        """The end-effector pose (base frame) of a joint configuration."""
        matrix = kinematics.flange_pose(joints) @ self.flange_to_tcp
        return Pose(tuple(matrix[:3, 3]), quat_from_matrix(matrix[:3, :3]))  # type: ignore[arg-type]

    # --- speed and gripper -------------------------------------------------------------------------
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


def _waypoint_names(single: str, count: int) -> list[str]:
    return [single] if count == 1 else [f"waypoints[{i}]" for i in range(count)]


def _where(name: str, fraction: float) -> str:
    """`target` for the end of the motion, else `path to target at 40%`-style labels, as one token."""
    if fraction >= 1.0:
        return name
    return f"path_to_{name}_at_{round(fraction * 100)}%"


def _first_violation(values: np.ndarray, limit: float, slack: float) -> int | None:
    """Index into the path (values[0] is the start) of the first sample breaking `values <= limit`.

    A path that starts outside (an arm switched on in an odd pose) may move back in: until it is
    inside once, a sample only counts as a violation when it is worse than the start.
    """
    inside = values <= limit
    entered = np.maximum.accumulate(inside)
    bad = ~inside & (np.concatenate([[False], entered[:-1]]) | (values > values[0] + slack))
    bad[0] = False
    if not bad.any():
        return None
    return int(np.argmax(bad)) - 1


def _tilt_deg(rotations: np.ndarray) -> np.ndarray:
    """Angle between the hand's approach axis (flange z) and straight down, per rotation (N, 3, 3)."""
    return np.degrees(np.arccos(np.clip(-rotations[:, 2, 2], -1.0, 1.0)))


def _rotation_about(rotation_vector: np.ndarray, fraction: float) -> np.ndarray:
    angle = float(np.linalg.norm(rotation_vector))
    if angle < 1e-12:
        return np.eye(3)
    return kinematics.axis_angle_matrix(rotation_vector / angle, angle * fraction)


class SafetyConfig(BaseModel):
    """The whole YAML file: `default` limits, and per-arm overrides merged over them."""

    model_config = ConfigDict(extra="forbid")
    default: ArmLimits = ArmLimits()
    arms: dict[str, dict[str, Any]] = {}
    keep_out: tuple[KeepOutZone, ...] = ()

    @field_validator("keep_out")
    @classmethod
    def _unique_zones(cls, zones: tuple[KeepOutZone, ...]) -> tuple[KeepOutZone, ...]:
        return check_names(zones)

    def limits_for(self, arm_name: str) -> ArmLimits:
        override = self.arms.get(arm_name)
        if not override:
            return self.default
        merged = self.default.model_dump()
        merged.update(override)
        try:
            return ArmLimits.model_validate(merged)
        except ValidationError as exc:
            raise ValueError(f"safety config arms.{arm_name}.{_one_line(exc)}") from None

    def envelope(self, arm_name: str, base_xyz_m: Sequence[float] = (0.0, 0.0, 0.0)) -> SafetyEnvelope:
        return SafetyEnvelope(self.limits_for(arm_name), arm_name, base_xyz_m=base_xyz_m, keep_out=self.keep_out)


def load_safety_config(path: str | Path | None) -> SafetyConfig:
    """Read a safety YAML file; None gives the built-in conservative defaults."""
    if path is None:
        return SafetyConfig()
    path = Path(path)
    data = yaml.safe_load(path.read_text()) or {}
    try:
        return SafetyConfig.model_validate(data)
    except ValidationError as exc:
        raise ValueError(f"{path}: {_one_line(exc)}") from None


def _one_line(exc: ValidationError) -> str:
    """The first broken rule as one line, `keep_out[0]: keep_out zone 'a': give exactly one of box or
    cylinder`, in the house's words (rpent.rule_words), not pydantic's several."""
    error = exc.errors()[0]
    where = "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in error["loc"]).lstrip(".")
    rule = "unknown field" if error["type"] == "extra_forbidden" else pydantic_rule(error)
    return f"{where}: {rule}" if where else rule
