"""Keep-out zones as rviz draws them (robots.franka.ros.zone_markers): plain data, ROS-free (runs without rclpy).
What rclpy makes of it on /keep_out_zones is test_arm_tf_rclpy.py's."""

from __future__ import annotations

import pytest

from robots.franka.keep_out import KeepOutZone
from robots.franka.ros.zone_markers import ZoneMarker, zone_markers


def test_a_box_is_a_cube_at_its_centre_and_a_cylinder_is_sized_by_its_diameter_each_named_above_its_top():
    box = KeepOutZone.model_validate({"name": "shelf", "box": {"x_m": [0.2, 0.5], "y_m": [0.62, 0.9], "z_m": [0.0, 0.9]}})
    cylinder = KeepOutZone.model_validate(
        {"name": "tripod", "cylinder": {"center_xy_m": [0.95, 0.55], "radius_m": 0.06, "z_m": [0.1, 1.4]}, "arms": ["left"]})
    shelf, tripod = zone_markers([box, cylinder])

    assert isinstance(shelf, ZoneMarker) and (shelf.name, shelf.shape) == ("shelf", "cube")
    assert shelf.center_xyz_m == pytest.approx((0.35, 0.76, 0.45))
    assert shelf.size_xyz_m == pytest.approx((0.3, 0.28, 0.9))
    assert (tripod.name, tripod.shape) == ("tripod", "cylinder")
    assert tripod.center_xyz_m == pytest.approx((0.95, 0.55, 0.75))
    assert tripod.size_xyz_m == pytest.approx((0.12, 0.12, 1.3))
    for marker, top in ((shelf, 0.9), (tripod, 1.4)):
        assert marker.label_xyz_m[:2] == marker.center_xyz_m[:2]
        assert top < marker.label_xyz_m[2] < top + 0.15
        r, g, b, a = marker.rgba
        assert r > 0.5 > g and b < 0.5 and a == pytest.approx(0.35)  # translucent red


def test_no_zones_make_no_markers():
    assert zone_markers([]) == []
