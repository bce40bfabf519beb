"""Keep-out zones (robots.franka.keep_out) as rviz draws them: plain data, no rclpy.

rpent_ros.runtime.telemetry.latch_zone_markers turns these into a MarkerArray on /keep_out_zones: for
each zone a translucent solid (a CUBE for a box, a CYLINDER for a cylinder) and its name above it, in
the world frame the zones are given in.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from robots.franka.keep_out import KeepOutZone, ZoneBox

#: Translucent red: the arm and what stands behind a zone stay visible through it.
ZONE_RGBA = (0.9, 0.1, 0.1, 0.35)
#: The name floats this far above the zone's top.
LABEL_ABOVE_M = 0.06


@dataclass(frozen=True)
class ZoneMarker:
    """One zone's solid and label: centre and size in metres, world frame (a cylinder's size is its
    diameter twice, then its height)."""

    name: str
    shape: Literal["cube", "cylinder"]
    center_xyz_m: tuple[float, float, float]
    size_xyz_m: tuple[float, float, float]
    label_xyz_m: tuple[float, float, float]
    rgba: tuple[float, float, float, float] = ZONE_RGBA


def zone_markers(zones: Iterable[KeepOutZone]) -> list[ZoneMarker]:
    """The markers of `zones`, in their order."""
    return [_marker(zone) for zone in zones]


def _marker(zone: KeepOutZone) -> ZoneMarker:
    shape = zone.shape
    if isinstance(shape, ZoneBox):
        (x0, x1), (y0, y1), (z0, z1) = shape.x_m, shape.y_m, shape.z_m
        x, y = (x0 + x1) / 2, (y0 + y1) / 2
        return ZoneMarker(zone.name, "cube", (x, y, (z0 + z1) / 2), (x1 - x0, y1 - y0, z1 - z0), (x, y, z1 + LABEL_ABOVE_M))
    (x, y), (z0, z1), diameter = shape.center_xy_m, shape.z_m, 2 * shape.radius_m
    return ZoneMarker(zone.name, "cylinder", (x, y, (z0 + z1) / 2), (diameter, diameter, z1 - z0),
                      (x, y, z1 + LABEL_ABOVE_M))
