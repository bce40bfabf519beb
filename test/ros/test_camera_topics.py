"""What a camera publishes for rviz, without ROS: CameraInfo fields, REP 118 depth, the point cloud,
where TF puts the optical frame, and CameraFrame over RuntimeCall."""

from __future__ import annotations

import math

import numpy as np
import pytest

from robots.franka.camera_mount import CameraMount
from rpent.runtime.camera import CameraFrame, Intrinsics
from rpent_ros.runtime.camera_topics import (
    calibration_fields,
    camera_placement,
    cloud_points,
    depth_for_ros,
    image_encoding,
    stamp_parts,
)
from rpent_ros.runtime.codec import decode_result, encode_result

K = Intrinsics(6, 4, 5.0, 6.0, 2.5, 1.5)


def _pose(x: float, y: float, z: float) -> np.ndarray:
    pose = np.eye(4)
    pose[:3, 3] = (x, y, z)
    return pose


def test_camera_info_carries_the_intrinsics_as_k_and_p_with_plumb_bob_distortion() -> None:
    fields = calibration_fields(Intrinsics(640, 480, 600.0, 601.0, 319.5, 239.0, (0.1, -0.2, 0.001)), 640, 480)
    assert (fields.width, fields.height, fields.distortion_model) == (640, 480, "plumb_bob")
    assert fields.k == [600.0, 0.0, 319.5, 0.0, 601.0, 239.0, 0.0, 0.0, 1.0]
    assert fields.p == [600.0, 0.0, 319.5, 0.0, 0.0, 601.0, 239.0, 0.0, 0.0, 0.0, 1.0, 0.0]
    assert fields.r == [1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0]
    assert fields.d == [0.1, -0.2, 0.001, 0.0, 0.0]  # k1 k2 p1 p2 k3, padded


def test_eight_coefficients_are_rational_polynomial_and_no_calibration_is_all_zeros() -> None:
    eight = calibration_fields(Intrinsics(64, 48, 50.0, 50.0, 31.5, 23.5, tuple(range(1, 9))), 64, 48)
    assert eight.distortion_model == "rational_polynomial" and eight.d == [float(v) for v in range(1, 9)]
    none = calibration_fields(None, 64, 48)
    assert (none.width, none.height) == (64, 48)
    assert none.k[0] == 0.0 and not any(none.k + none.p + none.d)  # sensor_msgs: K[0] == 0 is uncalibrated


def test_depth_for_ros_is_metres_with_nan_where_there_is_no_reading() -> None:
    depth = np.array([[0.5, 0.0], [np.nan, 1.25]], np.float32)
    out = depth_for_ros(depth)
    assert out.dtype == np.float32 and out[0, 0] == 0.5 and out[1, 1] == 1.25
    assert np.isnan(out[0, 1]) and np.isnan(out[1, 0])
    assert depth[0, 1] == 0.0  # the frame's own depth is left alone


def test_cloud_points_are_the_pixels_back_projected_with_their_colour() -> None:
    depth = np.zeros((4, 6), np.float32)
    depth[1, 4] = 2.0
    depth[3, 0] = 0.5
    rgb = np.zeros((4, 6, 3), np.uint8)
    rgb[1, 4] = (10, 20, 30)
    points = cloud_points(CameraFrame("front", rgb, depth, K), stride=1)
    assert points.shape == (2, 4) and points.dtype == np.float32
    x, y, z = points[0, :3]
    assert (x, y, z) == pytest.approx(((4 - 2.5) / 5.0 * 2.0, (1 - 1.5) / 6.0 * 2.0, 2.0))
    assert points[0, 3:].view(np.uint32)[0] == (10 << 16) | (20 << 8) | 30
    assert points[1, :3] == pytest.approx(((0 - 2.5) / 5.0 * 0.5, (3 - 1.5) / 6.0 * 0.5, 0.5))
    # Every second pixel each way: (1, 4) is skipped, (3, 0) is not on the grid either.
    assert cloud_points(CameraFrame("front", rgb, depth, K), stride=2).shape == (0, 4)
    assert cloud_points(CameraFrame("front", rgb, None, K)).shape == (0, 4)


def test_a_fixed_camera_is_placed_statically_in_its_arms_base_frame() -> None:
    frame = CameraFrame("top", np.zeros((4, 6, 3), np.uint8), None, K, _pose(0.5, 0.0, 1.2), "left_link0", info={"mount": "fixed"})
    placement = camera_placement(frame)
    assert (placement.parent, placement.child, placement.static) == ("left_link0", "top_optical_frame", True)
    assert np.allclose(placement.matrix, _pose(0.5, 0.0, 1.2))


def test_a_wrist_camera_hangs_under_the_flange_with_its_mount_transform() -> None:
    on_flange = _pose(0.05, 0.0, 0.03)
    frame = CameraFrame("wrist", np.zeros((4, 6, 3), np.uint8), None, K, _pose(0.4, 0.1, 0.5), "arm_link0", info={"mount": "wrist"})
    placement = camera_placement(frame, CameraMount("wrist", "arm", on_flange))
    assert (placement.parent, placement.child, placement.static) == ("arm_link8", "wrist_optical_frame", False)
    assert np.allclose(placement.matrix, on_flange)
    # A wrist camera known only by its pose at capture (e.g. through a proxy) is placed there, for that instant.
    bare = camera_placement(frame)
    assert (bare.parent, bare.static) == ("arm_link0", False) and np.allclose(bare.matrix, frame.T_base_camera)


def test_an_uncalibrated_camera_has_no_place_in_tf() -> None:
    frame = CameraFrame("usb", np.zeros((4, 6, 3), np.uint8))
    assert camera_placement(frame) is None
    assert camera_placement(frame, CameraMount("wrist", "arm", None)) is None


def test_stamps_split_into_seconds_and_nanoseconds() -> None:
    assert stamp_parts(1700000000.25) == (1700000000, 250000000)
    sec, nanosec = stamp_parts(math.pi)
    assert sec == 3 and abs(nanosec - 141592654) <= 1


def test_camera_frames_cross_runtime_call_whole() -> None:
    rng = np.random.default_rng(5)
    frame = CameraFrame(
        "wrist", rng.integers(0, 256, (4, 6, 3), dtype=np.uint8), rng.random((4, 6), dtype=np.float32),
        Intrinsics(6, 4, 5.0, 6.0, 2.5, 1.5, (0.1, 0.0, 0.0, 0.0, 0.01)), _pose(0.4, 0.1, 0.5), "left_link0",
        1700000000.5, {"mount": "wrist"},
    )  # fmt: skip
    back = decode_result(encode_result(frame))
    assert isinstance(back, CameraFrame) and back.intrinsics == frame.intrinsics
    assert np.array_equal(back.rgb, frame.rgb) and back.rgb.dtype == np.uint8
    assert np.array_equal(back.depth_m, frame.depth_m) and back.depth_m.dtype == np.float32
    assert np.array_equal(back.T_base_camera, frame.T_base_camera)
    assert (back.camera, back.base_frame, back.stamp_s, back.info) == ("wrist", "left_link0", 1700000000.5, {"mount": "wrist"})
    colour_only = decode_result(encode_result(CameraFrame("usb", frame.rgb)))
    assert colour_only.depth_m is None and colour_only.intrinsics is None and colour_only.T_base_camera is None


def test_colour_frames_publish_as_rgb8_without_alpha_and_grey_frames_as_mono8():
    rgba = np.arange(6 * 8 * 4, dtype=np.uint8).reshape(6, 8, 4)
    pixels, encoding = image_encoding(rgba)
    assert encoding == "rgb8" and np.array_equal(pixels, rgba[:, :, :3])
    grey = np.full((6, 8, 1), 7, np.uint8)
    pixels, encoding = image_encoding(grey)
    assert encoding == "mono8" and pixels.shape == (6, 8) and np.array_equal(pixels, grey[:, :, 0])


def test_frames_that_are_not_8_bit_rgb_or_grey_are_refused_with_the_rule():
    with pytest.raises(ValueError, match="image: must be uint8"):
        image_encoding(np.zeros((4, 4, 3), np.float32))
    with pytest.raises(ValueError, match=r"image: must be HxW, HxWx1, HxWx3 or HxWx4, got shape \(4, 4, 2\)"):
        image_encoding(np.zeros((4, 4, 2), np.uint8))
