"""Where a camera sits on a Franka deployment, and so where its optical frame is when it takes a picture.

A fixed camera's pose is one transform in an arm's base frame (`T_base_camera`). A wrist camera's
pose moves with the arm: the flange pose computed from the joints measured at capture time
(robots/franka/kinematics.py) composed with the camera's fixed place on the flange
(`T_flange_camera`). Either transform may be unknown (an uncalibrated camera): its pictures are
still shown, but its pixels cannot become points.

Frames are named like the arm's TF frames in rpent_ros (`<arm>_link0` is the arm's base), so a
point a tool reports and a frame rviz draws carry the same name.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from robots.franka import kinematics
from rpent.runtime.camera import Intrinsics


def base_frame_name(arm: str) -> str:
    return f"{arm}_link0"


@dataclass(frozen=True)
class CameraMount:
    """`transform` is T_base_camera (mount "fixed") or T_flange_camera (mount "wrist"); None: uncalibrated."""

    mount: Literal["fixed", "wrist"]
    arm: str
    transform: np.ndarray | None = None

    @property
    def base_frame(self) -> str:
        return base_frame_name(self.arm)

    @property
    def calibrated(self) -> bool:
        return self.transform is not None

    def pose(self, joints: Sequence[float] | None = None) -> np.ndarray | None:
        """T_base_camera at the instant `joints` were measured (wrist mounts need them)."""
        if self.transform is None:
            return None
        if self.mount == "fixed":
            return self.transform.copy()
        if joints is None:
            raise ValueError(f"a wrist camera on {self.arm!r} needs the arm's joints to know where it is")
        return kinematics.flange_pose(joints) @ self.transform


def fovy_intrinsics(fovy_deg: float, width: int, height: int) -> Intrinsics:
    """A pinhole camera with square pixels, its vertical field of view spanning the image height,
    principal point at the image centre ((w - 1) / 2, (h - 1) / 2 with pixel centres at integers):
    the projection MuJoCo renders with (checked against mj_ray in test/perception)."""
    fy = height / 2.0 / math.tan(math.radians(fovy_deg) / 2.0)
    return Intrinsics(width=width, height=height, fx=fy, fy=fy, cx=(width - 1) / 2.0, cy=(height - 1) / 2.0)


def translation(xyz: Sequence[float]) -> np.ndarray:
    out = np.eye(4)
    out[:3, 3] = xyz
    return out
