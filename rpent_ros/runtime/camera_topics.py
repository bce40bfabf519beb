"""What a camera publishes for rviz, as plain values (no rclpy, so it is tested without ROS).

Per camera `<c>` (topics relative to the publishing node):
- `<c>/image_raw` (rgb8) and `<c>/camera_info`: the colour image and its calibration;
- `<c>/depth/image_raw` (32FC1, metres along the optical axis, NaN where there is no reading, as
  REP 118 asks of floating-point depth) and `<c>/depth/camera_info`: depth aligned pixel for
  pixel to the colour image, so both share one calibration (DepthCloud finds it beside the depth);
- `<c>/points` (PointCloud2: x, y, z, rgb in the optical frame): the depth as coloured points,
  the display that needs no image plugin.
All are stamped alike in frame `<c>_optical_frame` (REP 103 optical convention: x right, y down,
z forward), which TF places in the arm's frames: a fixed camera on /tf_static under
`<arm>_link0` (its T_base_camera); a wrist camera on /tf under the flange `<arm>_link8` (its
T_flange_camera), re-stamped with each image, so it moves with the arm's own links.

An uncalibrated camera's CameraInfo is all zeros (sensor_msgs: K[0] == 0 means uncalibrated).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from rpent.runtime.camera import CameraFrame, Intrinsics

PLUMB_BOB = "plumb_bob"
RATIONAL_POLYNOMIAL = "rational_polynomial"


def image_encoding(frame: np.ndarray) -> tuple[np.ndarray, str]:
    """The pixels and sensor_msgs/Image encoding a camera frame is published with: HxWx3 or HxWx4
    uint8 -> rgb8 (alpha dropped: rviz and most subscribers take rgb8), HxW or HxWx1 uint8 -> mono8."""
    array = np.asarray(frame)
    if array.dtype != np.uint8:
        raise ValueError(f"image: must be uint8 (rgb8 or mono8), got {array.dtype}")
    if array.ndim == 3 and array.shape[2] == 1:
        array = array[:, :, 0]
    if array.ndim == 2:
        return array, "mono8"
    if array.ndim == 3 and array.shape[2] in (3, 4):
        return array[:, :, :3], "rgb8"
    raise ValueError(f"image: must be HxW, HxWx1, HxWx3 or HxWx4, got shape {array.shape}")


class Mount(Protocol):
    """What camera_placement reads of a robot's camera mount (the Franka's: robots.franka.camera_mount):
    fixed or on the wrist of `arm`, and `transform`, T_base_camera or T_flange_camera (None: uncalibrated)."""

    @property
    def mount(self) -> str: ...
    @property
    def arm(self) -> str: ...
    @property
    def transform(self) -> np.ndarray | None: ...


def optical_frame(camera: str) -> str:
    return f"{camera}_optical_frame"


def flange_frame(arm: str) -> str:
    """The flange in an arm's TF tree (the FR3's description, robots.franka.ros.description, names links `<arm>_link8`)."""
    return f"{arm}_link8"


@dataclass(frozen=True)
class CalibrationFields:
    """The calibration fields of a sensor_msgs/CameraInfo."""

    width: int
    height: int
    distortion_model: str
    d: list[float]
    k: list[float]
    r: list[float]
    p: list[float]


def calibration_fields(intrinsics: Intrinsics | None, width: int, height: int) -> CalibrationFields:
    """CameraInfo of an unrectified monocular image: K and P the pinhole, R identity, D the OpenCV
    coefficients (plumb_bob for up to 5, rational_polynomial for up to 8; thin-prism and tilt
    terms beyond 8 have no ROS model and are left out)."""
    if intrinsics is None:
        return CalibrationFields(width, height, PLUMB_BOB, [0.0] * 5, [0.0] * 9, [0.0] * 9, [0.0] * 12)
    k = intrinsics
    d = [float(v) for v in k.distortion]
    model, size = (PLUMB_BOB, 5) if len(d) <= 5 else (RATIONAL_POLYNOMIAL, 8)
    d = (d + [0.0] * size)[:size]
    return CalibrationFields(
        width=k.width,
        height=k.height,
        distortion_model=model,
        d=d,
        k=[k.fx, 0.0, k.cx, 0.0, k.fy, k.cy, 0.0, 0.0, 1.0],
        r=[1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0],
        p=[k.fx, 0.0, k.cx, 0.0, 0.0, k.fy, k.cy, 0.0, 0.0, 0.0, 1.0, 0.0],
    )


def depth_for_ros(depth_m: np.ndarray) -> np.ndarray:
    """32FC1 pixels: metres, NaN for no reading (the frames' 0 or NaN)."""
    depth = np.array(depth_m, dtype=np.float32, copy=True)
    depth[~(depth > 0)] = np.nan  # also catches NaN and negative values
    return depth


def cloud_points(frame: CameraFrame, stride: int = 1) -> np.ndarray:
    """N x 4 float32 (x, y, z, rgb) in the optical frame of every `stride`-th pixel with depth;
    rgb packs 0x00RRGGBB into the float's bits, as rviz reads it. Pinhole model (no undistortion:
    this is for looking at, back_project is for measuring)."""
    if frame.depth_m is None or frame.intrinsics is None:
        return np.empty((0, 4), np.float32)
    k = frame.intrinsics
    depth = np.asarray(frame.depth_m, np.float32)[::stride, ::stride]
    rows, cols = np.mgrid[0 : frame.height : stride, 0 : frame.width : stride]
    valid = depth > 0
    z = depth[valid]
    x = (cols[valid] - k.cx) / k.fx * z
    y = (rows[valid] - k.cy) / k.fy * z
    rgb = frame.rgb[::stride, ::stride][valid].astype(np.uint32)
    packed = ((rgb[:, 0] << 16) | (rgb[:, 1] << 8) | rgb[:, 2]).view(np.float32)
    return np.column_stack([x.astype(np.float32), y.astype(np.float32), z, packed])


@dataclass(frozen=True)
class CameraPlacement:
    """Where TF puts a camera's optical frame: `matrix` is parent -> child; `static` ones go on /tf_static."""

    parent: str
    child: str
    matrix: np.ndarray
    static: bool


def camera_placement(frame: CameraFrame, mount: Mount | None = None) -> CameraPlacement | None:
    """A calibrated wrist camera hangs under its arm's flange (the transform never changes; the arm
    moves it); a fixed one under its base frame. A camera that only knows its pose at capture
    time (no mount) is placed there in the base frame, for that instant. None: no pose known."""
    child = optical_frame(frame.camera)
    if mount is not None and mount.mount == "wrist" and mount.transform is not None:
        return CameraPlacement(flange_frame(mount.arm), child, np.asarray(mount.transform, float), static=False)
    if frame.T_base_camera is None or not frame.base_frame:
        return None
    fixed = (mount.mount if mount is not None else frame.info.get("mount", "fixed")) == "fixed"
    return CameraPlacement(frame.base_frame, child, np.asarray(frame.T_base_camera, float), static=fixed)


def stamp_parts(stamp_s: float) -> tuple[int, int]:
    """(sec, nanosec) of a time in seconds."""
    sec = math.floor(stamp_s)
    nanosec = round((stamp_s - sec) * 1e9)  # the fraction alone: stamp_s * 1e9 would lose its last bits
    if nanosec >= 1_000_000_000:
        sec, nanosec = sec + 1, nanosec - 1_000_000_000
    return int(sec), int(nanosec)


def is_real_stamp(stamp_s: Any) -> bool:
    return isinstance(stamp_s, (int, float)) and math.isfinite(stamp_s) and stamp_s > 0
