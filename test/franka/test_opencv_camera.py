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
