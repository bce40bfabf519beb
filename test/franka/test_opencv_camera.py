"""OpenCVCamera reads a device path and returns RGB frames (a video file stands in for /dev/videoN)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

cv2 = pytest.importorskip("cv2", reason="opencv-python is not installed")

from robots.franka.cameras import OpenCVCamera  # noqa: E402
from rpent.runtime.arm import RuntimeFault  # noqa: E402
from rpent.runtime.camera import Camera  # noqa: E402


def _write_red_video(path: Path, width: int = 64, height: int = 48) -> None:
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"MJPG"), 10.0, (width, height))
    assert writer.isOpened()
    bgr_red = np.zeros((height, width, 3), np.uint8)
    bgr_red[..., 2] = 255
    for _ in range(3):
        writer.write(bgr_red)
    writer.release()


def test_frames_come_back_as_rgb_uint8(tmp_path: Path) -> None:
    video = tmp_path / "red.avi"
    _write_red_video(video)
    camera = OpenCVCamera("wrist", str(video), width=64, height=48)
    try:
        assert isinstance(camera, Camera)
        frame = camera.capture()
        assert frame.dtype == np.uint8 and frame.shape == (48, 64, 3)
        red, green, blue = (float(frame[..., i].mean()) for i in range(3))
        assert red > 200 and green < 40 and blue < 40
    finally:
        camera.close()


def test_missing_device_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(RuntimeFault, match="cannot open device"):
        OpenCVCamera("front", str(tmp_path / "no-such-video0"))


def test_exhausted_stream_is_a_clear_error(tmp_path: Path) -> None:
    video = tmp_path / "red.avi"
    _write_red_video(video)
    camera = OpenCVCamera("wrist", str(video))
    try:
        for _ in range(3):
            camera.capture()
        with pytest.raises(RuntimeFault, match="no frame"):
            camera.capture()
    finally:
        camera.close()


def test_capture_frame_has_no_depth_and_the_configured_calibration(tmp_path: Path) -> None:
    from robots.franka import kinematics
    from robots.franka.camera_mount import CameraMount
    from rpent.runtime.camera import Intrinsics

    video = tmp_path / "red.avi"
    _write_red_video(video)
    k = Intrinsics(64, 48, 50.0, 50.0, 31.5, 23.5)
    on_flange = np.eye(4)
    on_flange[:3, 3] = (0.05, 0.0, 0.02)
    joints = (0.1, -0.2, 0.0, -1.8, 0.0, 1.6, 0.7)
    camera = OpenCVCamera(
        "hand", str(video), width=64, height=48, intrinsics=k, mount=CameraMount("wrist", "arm", on_flange),
        joints=lambda: joints,
    )
    try:
        frame = camera.capture_frame()
        assert frame.depth_m is None and not frame.can_back_project
        assert frame.intrinsics == k and frame.base_frame == "arm_link0"
        assert np.allclose(frame.T_base_camera, kinematics.flange_pose(joints) @ on_flange)
    finally:
        camera.close()


def test_intrinsics_for_another_image_size_are_not_applied(tmp_path: Path) -> None:
    from rpent.runtime.camera import Intrinsics

    video = tmp_path / "red.avi"
    _write_red_video(video)
    camera = OpenCVCamera("front", str(video), width=64, height=48, intrinsics=Intrinsics(640, 480, 500.0, 500.0, 319.5, 239.5))
    try:
        assert camera.capture_frame().intrinsics is None
    finally:
        camera.close()
