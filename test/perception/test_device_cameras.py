"""Real cameras built from the robot config (robots.franka.runtime.device_camera): a UVC camera has
colour only, with the config's calibration; a RealSense is chosen by serial and fails by name."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from robots.franka import kinematics
from robots.franka.config import CameraConfig
from robots.franka.runtime import device_camera
from rpent.runtime.arm import RuntimeFault
from rpent.runtime.camera import Intrinsics, capture_frame

cv2 = pytest.importorskip("cv2", reason="opencv-python is not installed")

Q = (0.1, -0.4, 0.05, -2.1, 0.02, 1.7, 0.8)


def _video(path: Path, width: int = 64, height: int = 48) -> Path:
    """A short video file: OpenCV opens it like /dev/videoN."""
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"MJPG"), 10.0, (width, height))
    assert writer.isOpened()
    for _ in range(3):
        writer.write(np.full((height, width, 3), 90, np.uint8))
    writer.release()
    return path


def _pose(x: float, y: float, z: float) -> list[list[float]]:
    pose = np.eye(4)
    pose[:3, 3] = (x, y, z)
    return pose.tolist()


def _joints_of(arm: str):
    assert arm == "left"
    return lambda: Q


def test_a_uvc_camera_gives_colour_without_depth_and_the_configured_calibration(tmp_path: Path) -> None:
    video = str(_video(tmp_path / "front.avi"))
    k = {"fx": 50.0, "fy": 51.0, "cx": 31.5, "cy": 23.5, "distortion": [0.1, 0.0, 0.0, 0.0, 0.0]}
    fixed = device_camera(
        CameraConfig(name="front", device=video, width=64, height=48, T_base_camera=_pose(1.2, 0.0, 0.6), intrinsics=k),
        "left", _joints_of,
    )  # fmt: skip
    wrist = device_camera(
        CameraConfig(name="hand", device=video, width=64, height=48, mount="wrist", T_flange_camera=_pose(0.05, 0, 0.04)),
        "left", _joints_of,
    )  # fmt: skip
    try:
        front, hand = capture_frame(fixed), capture_frame(wrist)
    finally:
        fixed.close()
        wrist.close()
    assert front.rgb.shape == (48, 64, 3) and front.depth_m is None and not front.can_back_project
    assert front.intrinsics == Intrinsics(64, 48, 50.0, 51.0, 31.5, 23.5, (0.1, 0.0, 0.0, 0.0, 0.0))
    assert np.allclose(front.T_base_camera, _pose(1.2, 0.0, 0.6)) and front.base_frame == "left_link0"
    assert hand.depth_m is None and hand.intrinsics is None
    assert np.allclose(hand.T_base_camera, kinematics.flange_pose(Q) @ np.asarray(_pose(0.05, 0, 0.04)))


def test_a_realsense_that_is_not_connected_is_refused_naming_its_serial() -> None:
    pytest.importorskip("pyrealsense2", reason="pyrealsense2 is not installed (pip install 'rpent[realsense]')")
    config = CameraConfig(name="hand", kind="realsense", serial="000000000000", mount="wrist")
    with pytest.raises(RuntimeFault, match=r"camera hand: no RealSense with serial '000000000000' is connected"):
        device_camera(config, "left", _joints_of)


def test_a_realsense_config_with_a_device_path_plays_that_recording(tmp_path: Path) -> None:
    pytest.importorskip("pyrealsense2", reason="pyrealsense2 is not installed (pip install 'rpent[realsense]')")
    from .realsense_recording import record

    recording = record(tmp_path / "scene.db3")
    in_base = _pose(1.2, 0.0, 0.6)
    camera = device_camera(
        CameraConfig(name="front", kind="realsense", device=str(recording.path), T_base_camera=in_base), "left", _joints_of
    )
    try:
        frame = capture_frame(camera)
    finally:
        camera.close()
    assert np.array_equal(frame.rgb, recording.rgb) and frame.depth_m is not None and frame.can_back_project
    assert np.allclose(frame.T_base_camera, in_base) and frame.info["serial"] == recording.serial


def test_a_realsense_without_its_sdk_is_refused_naming_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pyrealsense2", None)
    with pytest.raises(RuntimeFault, match=r"camera hand: kind realsense needs the RealSense SDK: pip install 'rpent\[realsense\]'"):
        device_camera(CameraConfig(name="hand", kind="realsense"), "left", _joints_of)
