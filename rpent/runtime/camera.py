"""Port for cameras: anything that returns an RGB uint8 frame on request, and, where the camera
knows more, a `CameraFrame` with aligned depth, intrinsics and the camera's pose at capture time.

Conventions (the same everywhere a frame is produced or consumed):
- Pixels: `row` counts down from the top, `col` right from the left, both from 0. As in OpenCV,
  integer image coordinates are pixel centres: pixel (row, col) is the image point (u, v) = (col, row).
- The camera's optical frame is OpenCV's: x right, y down, z forward (out of the lens).
  A pixel (u=col, v=row) at depth z (along the optical axis) is the point
  ((u - cx) z / fx, (v - cy) z / fy, z) in that frame.
- `T_base_camera` maps points from the optical frame to the arm's base frame named `base_frame`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

import numpy as np


@runtime_checkable
class Camera(Protocol):
    """A camera that captures one RGB frame (H x W x 3, uint8) per call."""

    name: str
    width: int
    height: int

    def capture(self) -> np.ndarray: ...

    def close(self) -> None: ...


@dataclass(frozen=True)
class Intrinsics:
    """Pinhole model of one image size; `distortion` in OpenCV order (k1, k2, p1, p2, k3), () = none."""

    width: int
    height: int
    fx: float
    fy: float
    cx: float
    cy: float
    distortion: tuple[float, ...] = ()

    def __post_init__(self) -> None:
        if self.width <= 0 or self.height <= 0:
            raise ValueError(f"intrinsics: width and height must be > 0, got {self.width} x {self.height}")
        if not (self.fx > 0 and self.fy > 0):
            raise ValueError(f"intrinsics: fx and fy must be > 0, got fx={self.fx}, fy={self.fy}")

    def matrix(self) -> np.ndarray:
        """K, 3 x 3."""
        return np.array([[self.fx, 0.0, self.cx], [0.0, self.fy, self.cy], [0.0, 0.0, 1.0]])

    def ray(self, row: float, col: float) -> np.ndarray:
        """Direction in the optical frame of pixel (row, col), scaled so that z = 1 (no distortion)."""
        return np.array([(col - self.cx) / self.fx, (row - self.cy) / self.fy, 1.0])

    def to_dict(self) -> dict[str, object]:
        return {
            "width": self.width, "height": self.height, "fx": self.fx, "fy": self.fy,
            "cx": self.cx, "cy": self.cy, "distortion": list(self.distortion),
        }  # fmt: skip


@dataclass(frozen=True)
class CameraFrame:
    """One capture: colour, and where the camera has them depth, intrinsics and pose, all of one instant.

    `depth_m` is H x W float32 metres along the optical axis (z, not ray length), aligned pixel for
    pixel with `rgb`; 0 or NaN means no reading. `T_base_camera` is None for a camera whose pose is
    not calibrated; `intrinsics` None for one whose model is unknown.
    """

    camera: str
    rgb: np.ndarray
    depth_m: np.ndarray | None = None
    intrinsics: Intrinsics | None = None
    T_base_camera: np.ndarray | None = None
    base_frame: str = "base"
    stamp_s: float = 0.0
    # Extra per-camera facts for records and tools (e.g. "mount": "wrist"); never needed to back-project.
    info: dict[str, object] = field(default_factory=dict)

    @property
    def width(self) -> int:
        return int(self.rgb.shape[1])

    @property
    def height(self) -> int:
        return int(self.rgb.shape[0])

    @property
    def has_depth(self) -> bool:
        return self.depth_m is not None

    @property
    def can_back_project(self) -> bool:
        """Depth, intrinsics and a pose: everything a pixel needs to become a point in the base frame."""
        return self.depth_m is not None and self.intrinsics is not None and self.T_base_camera is not None


def capture_frame(camera: Camera) -> CameraFrame:
    """A camera's full frame if it can give one, else its colour alone (no depth, no calibration)."""
    frame_fn = getattr(camera, "capture_frame", None)
    if callable(frame_fn):
        return frame_fn()
    import time

    return CameraFrame(camera=camera.name, rgb=camera.capture(), stamp_s=time.time())
