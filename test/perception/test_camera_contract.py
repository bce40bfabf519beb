"""The perception contract other parts build on: frames, intrinsics and camera config are checked."""

from __future__ import annotations

import numpy as np
import pytest
from pydantic import ValidationError

from robots.franka.config import CameraConfig, FrankaConfig
from rpent.runtime.camera import CameraFrame, Intrinsics, capture_frame


def test_intrinsics_matrix_and_ray_follow_the_pinhole_model() -> None:
    k = Intrinsics(width=320, height=240, fx=250.0, fy=260.0, cx=159.5, cy=119.5)
    assert np.allclose(k.matrix(), [[250, 0, 159.5], [0, 260, 119.5], [0, 0, 1]])
    # Pixel (row, col) = (v, u): K @ ray gives back (u, v, 1).
    assert np.allclose(k.matrix() @ k.ray(10.0, 300.0), [300.0, 10.0, 1.0])


def test_intrinsics_refuse_a_non_positive_focal_length() -> None:
    with pytest.raises(ValueError, match="fx and fy must be > 0"):
        Intrinsics(width=320, height=240, fx=0.0, fy=260.0, cx=159.5, cy=119.5)


def test_frame_can_back_project_only_with_depth_intrinsics_and_pose() -> None:
    rgb = np.zeros((4, 6, 3), np.uint8)
    k = Intrinsics(6, 4, 5.0, 5.0, 2.5, 1.5)
    full = CameraFrame("front", rgb, np.ones((4, 6), np.float32), k, np.eye(4))
    assert (full.width, full.height, full.can_back_project) == (6, 4, True)
    assert not CameraFrame("front", rgb, None, k, np.eye(4)).can_back_project
    assert not CameraFrame("front", rgb, np.ones((4, 6), np.float32), k, None).can_back_project


def test_capture_frame_falls_back_to_colour_for_rgb_only_cameras() -> None:
    class RgbOnly:
        name, width, height = "usb", 6, 4

        def capture(self) -> np.ndarray:
            return np.full((4, 6, 3), 7, np.uint8)

        def close(self) -> None: ...

    frame = capture_frame(RgbOnly())
    assert frame.camera == "usb" and frame.depth_m is None and not frame.can_back_project
    assert int(frame.rgb[0, 0, 0]) == 7


def test_camera_config_takes_the_transform_of_its_mount() -> None:
    pose = np.eye(4)
    pose[:3, 3] = (0.1, 0.2, 0.3)
    fixed = CameraConfig(name="front", T_base_camera=pose.tolist())
    assert np.allclose(fixed.transform(), pose)
    wrist = CameraConfig(name="hand", kind="realsense", mount="wrist", T_flange_camera=pose.tolist())
    assert np.allclose(wrist.transform(), pose)
    with pytest.raises(ValidationError, match="T_base_camera is for mount: fixed"):
        CameraConfig(name="hand", mount="wrist", T_base_camera=pose.tolist())
    with pytest.raises(ValidationError, match="T_flange_camera is for mount: wrist"):
        CameraConfig(name="front", T_flange_camera=pose.tolist())


@pytest.mark.parametrize(
    ("matrix", "rule"),
    [
        ([[1, 0, 0], [0, 1, 0], [0, 0, 1]], "4 x 4"),
        ([[2, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1]], "rotation"),
        ([[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0], [0, 0, 1, 1]], "last row"),
        ([[-1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1]], "determinant"),
    ],
)
def test_camera_config_refuses_a_transform_that_is_not_rigid(matrix: list[list[float]], rule: str) -> None:
    with pytest.raises(ValidationError, match=rf"T_base_camera[\s\S]*{rule}"):
        CameraConfig(name="front", T_base_camera=matrix)


def test_config_refuses_a_camera_on_an_unknown_arm_and_duplicate_names() -> None:
    with pytest.raises(ValidationError, match="names arm 'left'"):
        FrankaConfig(cameras=[CameraConfig(name="front", arm="left")])
    with pytest.raises(ValidationError, match="two cameras are named 'front'"):
        FrankaConfig(cameras=[CameraConfig(name="front"), CameraConfig(name="front", device=1)])
