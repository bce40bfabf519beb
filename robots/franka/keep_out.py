"""Keep-out zones: the things a real cell has inside the arm's reach (a camera tripod, a shelf, a monitor,
the operator's side of the table), each a named box or vertical cylinder in the world frame, for every
arm or for some. No link of the arm and no part of the hand may come within `keep_out_margin_m` of a
zone, at the target or anywhere along the path (robots.franka.safety checks them with the table, for
every motion, home, a policy's steps and both arms of a dual move).

The table needs only the arm's lowest points; a zone can reach in anywhere. The envelope's check points
(robots.franka.kinematics.body_points) lie up to 16 cm apart along a link, wider than a tripod's leg,
and mark only the hand's corners, so zones are checked against `zone_points`: the link chain filled in
(spheres at most 4 cm apart, whose union leaves under 4 mm of each link's capsule uncovered, inside
the margin) and the hand as a solid block down to its fingertips.
"""

from __future__ import annotations

import re

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from robots.franka import kinematics

_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_-]*$")


def _ordered(name: str, bounds: tuple[float, float]) -> tuple[float, float]:
    if not bounds[0] < bounds[1]:
        raise ValueError(f"{name}: lower bound {bounds[0]} must be below upper bound {bounds[1]}")
    return bounds


class ZoneBox(BaseModel):
    """An axis-aligned box in the world frame [m]."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    x_m: tuple[float, float]
    y_m: tuple[float, float]
    z_m: tuple[float, float]

    @model_validator(mode="after")
    def _check(self) -> ZoneBox:
        for axis in ("x_m", "y_m", "z_m"):
            _ordered(f"box.{axis}", getattr(self, axis))
        return self

    def signed_distance(self, points: np.ndarray) -> np.ndarray:
        lo = np.array([self.x_m[0], self.y_m[0], self.z_m[0]])
        hi = np.array([self.x_m[1], self.y_m[1], self.z_m[1]])
        return _signed(np.maximum(lo - points, points - hi))

    def describe(self) -> str:
        return f"box x {list(self.x_m)} y {list(self.y_m)} z {list(self.z_m)} m"


class ZoneCylinder(BaseModel):
    """A vertical cylinder in the world frame: its axis at `center_xy_m`, from `z_m[0]` to `z_m[1]` [m]."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    center_xy_m: tuple[float, float]
    radius_m: float = Field(gt=0)
    z_m: tuple[float, float]

    @model_validator(mode="after")
    def _check(self) -> ZoneCylinder:
        _ordered("cylinder.z_m", self.z_m)
        return self

    def signed_distance(self, points: np.ndarray) -> np.ndarray:
        radial = np.linalg.norm(points[..., :2] - np.asarray(self.center_xy_m), axis=-1) - self.radius_m
        vertical = np.maximum(self.z_m[0] - points[..., 2], points[..., 2] - self.z_m[1])
        return _signed(np.stack([radial, vertical], axis=-1))

    def describe(self) -> str:
        x, y = self.center_xy_m
        return f"cylinder at x {x} y {y} radius {self.radius_m} z {list(self.z_m)} m"


def _signed(excess: np.ndarray) -> np.ndarray:
    """Signed distance from per-axis excesses (positive outside on that axis): negative inside."""
    outside = np.linalg.norm(np.maximum(excess, 0.0), axis=-1)
    inside = np.minimum(np.max(excess, axis=-1), 0.0)
    return outside + inside


class KeepOutZone(BaseModel):
    """One named zone: a `box` or a `cylinder`, for `arms` (absent: every arm)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    name: str
    box: ZoneBox | None = None
    cylinder: ZoneCylinder | None = None
    arms: tuple[str, ...] | None = None

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not _NAME.match(value):
            raise ValueError(f"zone name {value!r}: letters, digits, '_' and '-', starting with a letter")
        return value

    @model_validator(mode="after")
    def _one_shape(self) -> KeepOutZone:
        if (self.box is None) == (self.cylinder is None):
            raise ValueError(f"keep_out zone {self.name!r}: give exactly one of box or cylinder")
        return self

    @property
    def shape(self) -> ZoneBox | ZoneCylinder:
        return self.box if self.box is not None else self.cylinder  # type: ignore[return-value]

    def applies_to(self, arm_name: str) -> bool:
        return self.arms is None or arm_name in self.arms

    def signed_distance(self, points: np.ndarray) -> np.ndarray:
        """Distance from each point (..., 3) to the zone's surface, world frame; negative inside."""
        return self.shape.signed_distance(points)

    def describe(self) -> str:
        return f"keep-out zone {self.name!r} ({self.shape.describe()})"


def check_names(zones: tuple[KeepOutZone, ...]) -> tuple[KeepOutZone, ...]:
    """Zone names are unique: a refusal names one zone, and rviz keys its marker by the name."""
    seen: set[str] = set()
    for zone in zones:
        if zone.name in seen:
            raise ValueError(f"keep_out: zone name {zone.name!r} is used twice")
        seen.add(zone.name)
    return zones


# --- the arm and the hand as zones see them ---------------------------------------------------------
_LINKS = len(kinematics.LINK_POINTS)
_FILL = 4  # points added between two neighbouring link points (their gaps are up to 0.16 m)
_TIP_Z = kinematics.HAND_TO_TCP_M + kinematics.FINGERTIP_PAST_TCP_M


def _link_chain() -> tuple[np.ndarray, list[float], list[str]]:
    """How each point of the link chain mixes the link points (C x L), its radius and its link's name."""
    rows, radii, names = [], [], []
    body_radii, body_names = kinematics.POINT_RADII_M, kinematics.POINT_NAMES
    for a in range(_LINKS - 1):
        for step in range(_FILL + 1):
            f = step / (_FILL + 1)
            row = np.zeros(_LINKS)
            row[a], row[a + 1] = 1 - f, f
            rows.append(row)
            radii.append((1 - f) * body_radii[a] + f * body_radii[a + 1])
            names.append(body_names[a] if f < 0.5 else body_names[a + 1])
    rows.append(np.eye(_LINKS)[-1])
    radii.append(body_radii[_LINKS - 1])
    names.append(body_names[_LINKS - 1])
    return np.array(rows), radii, names


def _hand_grid() -> tuple[np.ndarray, list[float], list[str]]:
    """The Franka Hand as a solid (hand frame, z towards the fingertips): its body a 6 x 20 x 6.5 cm block,
    the fingers the block between them at their widest opening down to the fingertips, filled with 1 cm
    spheres at most 2.5 cm apart. Solid on purpose: nothing of a zone may come between the fingers."""
    body = [(x, y, z) for x in (-0.03, 0.0, 0.03) for y in np.linspace(-0.10, 0.10, 9) for z in (0.0, 0.0325, 0.065)]
    fingers = [(x, y, z) for x in (-0.01, 0.01) for y in np.linspace(-0.05, 0.05, 5)
               for z in np.linspace(0.065, _TIP_Z, 3)[1:]]
    points = np.array([[*p, 1.0] for p in body + fingers])
    return points, [0.01] * len(points), ["hand"] * len(body) + ["fingertip"] * len(fingers)


_CHAIN, _CHAIN_RADII, _CHAIN_NAMES = _link_chain()
_HAND, _HAND_RADII, _HAND_NAMES = _hand_grid()
CHAIN_RADII_M = np.array(_CHAIN_RADII + _HAND_RADII)
CHAIN_NAMES = tuple(_CHAIN_NAMES + _HAND_NAMES)


def zone_points(frames: np.ndarray) -> np.ndarray:
    """Points of the arm and hand (base frame) that zones are checked against, for frames (N, 8, 4, 4):
    (N, C, 3), each the centre of a sphere of radius CHAIN_RADII_M[c] belonging to CHAIN_NAMES[c]."""
    links = kinematics.body_points(frames)[:, :_LINKS]
    chain = np.einsum("cl,nli->nci", _CHAIN, links)
    hand = (frames[:, kinematics.JOINT_COUNT] @ kinematics.FLANGE_TO_HAND) @ _HAND.T  # (N, 4, H)
    return np.concatenate([chain, np.transpose(hand, (0, 2, 1))[..., :3]], axis=1)


def penetration(zone: KeepOutZone, points: np.ndarray, margin_m: float) -> np.ndarray:
    """How far each point's sphere reaches into the zone plus margin (N, C): positive is too close."""
    return CHAIN_RADII_M + margin_m - zone.signed_distance(points)
