"""RealSense D4xx through pyrealsense2: device choice, errors, and, on a recording the SDK's software
device made of a known scene, the real pipeline's colour, depth aligned to colour, depth scale,
intrinsics and the camera's pose."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from robots.franka import kinematics
from robots.franka.camera_mount import CameraMount
from robots.franka.hardware.realsense import RealSenseCamera, choose_serial, opencv_distortion
from rpent.runtime.arm import RuntimeFault
from rpent.runtime.camera import CameraFrame, Intrinsics

from .realsense_recording import BOX_X_M, BOX_Y_M, BOX_Z_M, RED, WALL_Z_M, Lens, Recording, record


@pytest.fixture
def rs():
    return pytest.importorskip("pyrealsense2", reason="pyrealsense2 is not installed (pip install 'rpent[realsense]')")


@pytest.fixture
def recording(rs, tmp_path: Path) -> Recording:
    return record(tmp_path / "scene.db3")


def _interior(mask: np.ndarray, margin: int = 2) -> np.ndarray:
    """Pixels of `mask` at least `margin` pixels from its border (edges resample across surfaces)."""
    inner = mask.copy()
    for dr in range(-margin, margin + 1):
        for dc in range(-margin, margin + 1):
            inner &= np.roll(np.roll(mask, dr, axis=0), dc, axis=1)
    return inner


def _one_frame(camera: RealSenseCamera) -> tuple[RealSenseCamera, CameraFrame]:
    """The camera and the one frame it captured before it was closed."""
    try:
        return camera, camera.capture_frame()
    finally:
        camera.close()


def test_depth_is_aligned_to_the_colour_pixels_in_metres(recording: Recording) -> None:
    camera, frame = _one_frame(RealSenseCamera("front", recording=recording.path))
    assert frame.rgb.shape == (recording.colour.height, recording.colour.width, 3)
    assert frame.depth_m is not None and frame.depth_m.shape == frame.rgb.shape[:2]
    assert frame.depth_m.dtype == np.float32
    assert np.array_equal(frame.rgb, recording.rgb)
    box = np.all(frame.rgb == RED, axis=2)
    # Every colour pixel on the box reads the box's distance; the depth camera, 25 mm to the left,
    # sees the box elsewhere in its own image, so unaligned depth would put the wall here.
    assert np.abs(frame.depth_m[_interior(box)] - BOX_Z_M).max() < 1e-3
    wall = _interior(~box)
    readings = frame.depth_m[wall] > 0  # minus the strip behind the box the depth camera cannot see
    assert readings.mean() > 0.85
    assert np.abs(frame.depth_m[wall][readings] - WALL_Z_M).max() < 1e-3


def test_intrinsics_are_the_colour_streams_and_back_project_the_box_where_it_is(recording: Recording) -> None:
    camera, frame = _one_frame(RealSenseCamera("front", recording=recording.path))
    c = recording.colour
    assert (camera.width, camera.height) == (c.width, c.height)
    k = frame.intrinsics
    assert k is not None and (k.width, k.height, k.distortion) == (c.width, c.height, ())
    assert (k.fx, k.fy, k.cx, k.cy) == pytest.approx((c.fx, c.fy, c.ppx, c.ppy), rel=1e-6)  # the SDK's float32
    assert camera.depth_scale_m == pytest.approx(recording.depth_units_m)
    # The colour pixel of the box face's centre, back-projected with the reported model.
    centre = np.array([np.mean(BOX_X_M), np.mean(BOX_Y_M), BOX_Z_M])
    col, row = (round(c.fx * centre[0] / centre[2] + c.ppx), round(c.fy * centre[1] / centre[2] + c.ppy))
    point = frame.depth_m[row, col] * k.ray(row, col)
    expected = BOX_Z_M * k.ray(row, col)  # the box face point under that pixel centre
    assert np.linalg.norm(point - expected) < 1e-3
    assert np.linalg.norm(point - centre) < 0.005  # within the pixel's footprint of the centre


def test_brown_conrady_coefficients_are_reported_in_opencv_order(rs, tmp_path: Path) -> None:
    coeffs = (0.11, -0.23, 0.0012, -0.0007, 0.05)
    lens = Lens(160, 120, 140.0, 141.0, 80.2, 59.7, "brown_conrady", coeffs)
    camera = RealSenseCamera("front", recording=record(tmp_path / "lens.db3", colour=lens).path)
    try:
        assert camera.intrinsics is not None
        assert camera.intrinsics.distortion == pytest.approx(coeffs, rel=1e-6)
    finally:
        camera.close()


def test_a_lens_model_opencv_cannot_express_gives_pictures_but_no_intrinsics(rs, tmp_path: Path) -> None:
    lens = Lens(160, 120, 140.0, 141.0, 80.2, 59.7, "inverse_brown_conrady", (0.1, 0.02, 0.0, 0.0, 0.0))
    _, frame = _one_frame(RealSenseCamera("front", recording=record(tmp_path / "inverse.db3", colour=lens).path))
    assert frame.intrinsics is None and frame.depth_m is not None and not frame.can_back_project


@pytest.mark.parametrize(
    ("model", "coeffs", "expected"),
    [
        ("none", (0.1, 0.0, 0.0, 0.0, 0.0), ()),
        ("inverse_brown_conrady", (0.0,) * 5, ()),
        ("modified_brown_conrady", (0.1, 0.2, 0.01, 0.02, 0.3), (0.1, 0.2, 0.01, 0.02, 0.3)),
        ("kannala_brandt4", (0.1, 0.2, 0.3, 0.4, 0.0), None),
    ],
)
def test_distortion_models_map_to_opencv_or_to_nothing(model: str, coeffs: tuple, expected: tuple | None) -> None:
    assert opencv_distortion("front", model, coeffs) == expected


def test_configured_intrinsics_override_the_device_and_must_fit_its_size(recording: Recording) -> None:
    mine = Intrinsics(160, 120, 150.0, 150.0, 79.5, 59.5, (0.01, 0.0, 0.0, 0.0, 0.0))
    camera = RealSenseCamera("front", recording=recording.path, intrinsics=mine)
    try:
        assert camera.capture_frame().intrinsics == mine
    finally:
        camera.close()
    with pytest.raises(
        RuntimeFault, match=r"camera front: intrinsics are for 640 x 480 but recording scene.db3 delivers 160 x 120"
    ):
        RealSenseCamera("front", recording=recording.path, intrinsics=Intrinsics(640, 480, 600.0, 600.0, 320.0, 240.0))


def test_pose_is_the_fixed_transform_or_the_flange_pose_of_the_joints_read_at_capture(recording: Recording) -> None:
    on_flange = np.eye(4)
    on_flange[:3, 3] = (0.05, 0.0, 0.04)
    in_base = np.eye(4)
    in_base[:3, 3] = (1.2, 0.0, 0.6)
    q = (0.1, -0.4, 0.05, -2.1, 0.02, 1.7, 0.8)
    reads = []

    def joints() -> tuple[float, ...]:
        reads.append(q)
        return q

    cameras = {
        "wrist": RealSenseCamera(
            "wrist", recording=recording.path, mount=CameraMount("wrist", "left", on_flange), joints=joints
        ),
        "fixed": RealSenseCamera("fixed", recording=recording.path, mount=CameraMount("fixed", "left", in_base)),
        "loose": RealSenseCamera("loose", recording=recording.path),
    }
    try:
        frames = {name: camera.capture_frame() for name, camera in cameras.items()}
    finally:
        for camera in cameras.values():
            camera.close()
    assert len(reads) == 1
    assert np.allclose(frames["wrist"].T_base_camera, kinematics.flange_pose(q) @ on_flange)
    assert frames["wrist"].base_frame == "left_link0" and frames["wrist"].info["mount"] == "wrist"
    assert np.allclose(frames["fixed"].T_base_camera, in_base) and frames["fixed"].can_back_project
    assert frames["loose"].T_base_camera is None and not frames["loose"].can_back_project


def test_capture_gives_the_colour_pixels_and_a_closed_camera_refuses(recording: Recording) -> None:
    camera = RealSenseCamera("front", recording=recording.path)
    for _ in range(5):  # more captures than recorded frames: playback starts over
        assert np.array_equal(camera.capture(), recording.rgb)
    camera.close()
    with pytest.raises(RuntimeFault, match="camera front: closed"):
        camera.capture_frame()


def test_a_recording_of_another_serial_is_refused_naming_both(recording: Recording) -> None:
    with pytest.raises(RuntimeFault, match=rf"recording is of RealSense {recording.serial}, not serial '000111'"):
        RealSenseCamera("front", serial="000111", recording=recording.path)


def test_a_missing_recording_is_refused_naming_the_path(rs, tmp_path: Path) -> None:
    with pytest.raises(RuntimeFault, match=r"camera front: recording '.*nothing.db3' is not a file"):
        RealSenseCamera("front", recording=tmp_path / "nothing.db3")


def test_a_serial_that_is_not_connected_is_named_in_the_fault(rs) -> None:
    with pytest.raises(RuntimeFault, match=r"camera front: no RealSense with serial '000000000000' is connected"):
        RealSenseCamera("front", serial="000000000000")


def test_device_choice_takes_the_serial_or_the_only_device() -> None:
    assert choose_serial("front", "222", ["111", "222"]) == "222"
    assert choose_serial("front", None, ["111"]) == "111"
    with pytest.raises(RuntimeFault, match=r"2 RealSense devices are connected \(111, 222\); set `serial`"):
        choose_serial("front", None, ["111", "222"])
    with pytest.raises(RuntimeFault, match="camera front: no RealSense device is connected"):
        choose_serial("front", None, [])
    with pytest.raises(RuntimeFault, match=r"serial '333' is connected \(connected: 111, 222\)"):
        choose_serial("front", "333", ["111", "222"])


def test_without_pyrealsense2_the_fault_names_the_extra_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pyrealsense2", None)  # import now raises ImportError
    with pytest.raises(
        RuntimeFault, match=r"camera front: kind realsense needs the RealSense SDK: pip install 'rpent\[realsense\]'"
    ):
        RealSenseCamera("front", serial="123")
