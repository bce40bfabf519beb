"""Hand-eye calibration from board views: where a camera sits on the flange, or in the arm's base frame.

Two set-ups, one unknown pair each:
- wrist camera (eye-in-hand), board still on the table: X = T_flange_camera, Y = T_base_board,
  and for every view  T_base_flange_i @ X @ T_camera_board_i = Y.
- fixed camera (eye-to-hand), board on the flange: X = T_base_camera, Y = T_flange_board,
  and  X @ T_camera_board_i = T_base_flange_i @ Y.

OpenCV's closed-form solvers (cv2.calibrateHandEye; the eye-to-hand case by feeding it the
inverted flange poses) give a first X. A least-squares refinement of X and Y together then
minimises the reprojection error of every board corner in every view, which is what the
pictures measure, rather than the per-view board poses, whose depth is their weakest part.
The residuals say how well the result explains the views: reprojection error in pixels, and the
pose consistency, how far each view's own board pose (through X) lies from the common Y.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import cv2
import numpy as np
from scipy.optimize import least_squares

from robots.franka.calibration.charuco import BoardView

Mount = Literal["wrist", "fixed"]

MIN_VIEWS = 5
# Hand-eye needs the hand turned about two different axes between views; below this spread
# (the second-largest extent of the views' relative rotations) the camera's position is ill-posed.
MIN_ROTATION_SPREAD_DEG = 2.0


class CalibrationError(ValueError):
    """Calibration cannot give a trustworthy result; the message says why and what to change."""


@dataclass(frozen=True)
class HandEyeSample:
    """One view: where the flange was (from the measured joints) and the board as the camera saw it."""

    label: str
    T_base_flange: np.ndarray
    view: BoardView


@dataclass(frozen=True)
class ViewResidual:
    label: str
    reprojection_rms_px: float
    position_mm: float
    angle_deg: float


@dataclass(frozen=True)
class HandEyeResult:
    mount: Mount
    transform: np.ndarray  # T_flange_camera (wrist) or T_base_camera (fixed)
    board_pose: np.ndarray  # T_base_board (wrist) or T_flange_board (fixed)
    views: tuple[ViewResidual, ...]
    initial_method: str

    @property
    def reprojection_rms_px(self) -> float:
        return float(math.sqrt(np.mean([v.reprojection_rms_px**2 for v in self.views])))

    @property
    def reprojection_max_px(self) -> float:
        return max(v.reprojection_rms_px for v in self.views)

    @property
    def consistency_mm(self) -> float:
        """RMS over views of the distance between the view's board position and the common one."""
        return float(math.sqrt(np.mean([v.position_mm**2 for v in self.views])))

    @property
    def consistency_deg(self) -> float:
        return float(math.sqrt(np.mean([v.angle_deg**2 for v in self.views])))

    def worst(self) -> ViewResidual:
        return max(self.views, key=lambda v: (v.reprojection_rms_px, v.position_mm))


def solve(samples: Sequence[HandEyeSample], mount: Mount, camera_matrix: np.ndarray, distortion: np.ndarray) -> HandEyeResult:
    """X and Y (see the module doc) from the samples; CalibrationError if they cannot determine them."""
    if len(samples) < MIN_VIEWS:
        raise CalibrationError(f"views: {len(samples)} usable views, at least {MIN_VIEWS} needed")
    spread = rotation_spread_deg([s.T_base_flange for s in samples])
    if spread < MIN_ROTATION_SPREAD_DEG:
        raise CalibrationError(
            f"views: the hand turns about only one axis across the poses (spread {spread:.1f} deg, "
            f"at least {MIN_ROTATION_SPREAD_DEG} deg needed); add poses tilted about other axes"
        )
    x0, method = _closed_form(samples, mount)
    y0 = _mean_pose([_board_pose(s, x0, mount) for s in samples])
    x, y = _refine(samples, mount, x0, y0, camera_matrix, distortion)
    views = tuple(_residual(s, mount, x, y, camera_matrix, distortion) for s in samples)
    return HandEyeResult(mount, x, y, views, method)


def rotation_spread_deg(poses: Sequence[np.ndarray]) -> float:
    """Second singular value of the rotation vectors of every pose relative to the first (degrees)."""
    base = poses[0][:3, :3]
    vectors = np.array([cv2.Rodrigues(base.T @ p[:3, :3])[0].reshape(3) for p in poses])
    if len(vectors) < 2:
        return 0.0
    singular = np.linalg.svd(vectors - vectors.mean(axis=0), compute_uv=False)
    return math.degrees(float(singular[1]) / math.sqrt(len(vectors)))


def _closed_form(samples: Sequence[HandEyeSample], mount: Mount) -> tuple[np.ndarray, str]:
    """OpenCV's closed-form X: the method whose result the views agree on best."""
    hands = [s.T_base_flange if mount == "wrist" else np.linalg.inv(s.T_base_flange) for s in samples]
    boards = [s.view.T_camera_board for s in samples]
    best: tuple[float, np.ndarray, str] | None = None
    for name in ("PARK", "TSAI", "HORAUD", "DANIILIDIS"):
        rotation, translation = cv2.calibrateHandEye(
            [h[:3, :3] for h in hands], [h[:3, 3] for h in hands],
            [b[:3, :3] for b in boards], [b[:3, 3] for b in boards],
            method=getattr(cv2, f"CALIB_HAND_EYE_{name}"),
        )  # fmt: skip
        x = np.eye(4)
        x[:3, :3], x[:3, 3] = rotation, translation.reshape(3)
        if not np.all(np.isfinite(x)):
            continue
        spread = _spread_mm([_board_pose(s, x, mount) for s in samples])
        if best is None or spread < best[0]:
            best = (spread, x, name)
    if best is None:
        raise CalibrationError("views: OpenCV's hand-eye solvers found no solution for these views")
    return best[1], best[2]


def _board_pose(sample: HandEyeSample, x: np.ndarray, mount: Mount) -> np.ndarray:
    """The board pose (Y) this one view implies, given X."""
    if mount == "wrist":
        return sample.T_base_flange @ x @ sample.view.T_camera_board
    return np.linalg.inv(sample.T_base_flange) @ x @ sample.view.T_camera_board


def _camera_board(sample: HandEyeSample, x: np.ndarray, y: np.ndarray, mount: Mount) -> np.ndarray:
    """The board in the camera frame that X and Y predict for this view."""
    if mount == "wrist":
        return np.linalg.inv(x) @ np.linalg.inv(sample.T_base_flange) @ y
    return np.linalg.inv(x) @ sample.T_base_flange @ y


def _spread_mm(poses: Sequence[np.ndarray]) -> float:
    positions = np.array([p[:3, 3] for p in poses])
    return float(np.sqrt(np.mean(np.sum((positions - positions.mean(axis=0)) ** 2, axis=1)))) * 1000.0


def _mean_pose(poses: Sequence[np.ndarray]) -> np.ndarray:
    """Mean translation; rotation: the nearest rotation to the mean matrix (chordal mean)."""
    u, _, vt = np.linalg.svd(np.mean([p[:3, :3] for p in poses], axis=0))
    mean = np.eye(4)
    mean[:3, :3] = u @ np.diag([1.0, 1.0, np.linalg.det(u @ vt)]) @ vt
    mean[:3, 3] = np.mean([p[:3, 3] for p in poses], axis=0)
    return mean


def _params(matrix: np.ndarray) -> np.ndarray:
    return np.concatenate([cv2.Rodrigues(matrix[:3, :3])[0].reshape(3), matrix[:3, 3]])


def _matrix(params: np.ndarray) -> np.ndarray:
    matrix = np.eye(4)
    matrix[:3, :3] = cv2.Rodrigues(np.asarray(params[:3], dtype=float))[0]
    matrix[:3, 3] = params[3:6]
    return matrix


def _reprojection(sample: HandEyeSample, t_camera_board: np.ndarray, k: np.ndarray, dist: np.ndarray) -> np.ndarray:
    rvec = cv2.Rodrigues(t_camera_board[:3, :3])[0]
    projected, _ = cv2.projectPoints(sample.view.object_points, rvec, t_camera_board[:3, 3], k, dist)
    return (projected.reshape(-1, 2) - sample.view.image_points).reshape(-1)


def _refine(
    samples: Sequence[HandEyeSample], mount: Mount, x0: np.ndarray, y0: np.ndarray, k: np.ndarray, dist: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    def residuals(params: np.ndarray) -> np.ndarray:
        x, y = _matrix(params[:6]), _matrix(params[6:])
        return np.concatenate([_reprojection(s, _camera_board(s, x, y, mount), k, dist) for s in samples])

    fit = least_squares(residuals, np.concatenate([_params(x0), _params(y0)]), method="lm", x_scale="jac")
    return _matrix(fit.x[:6]), _matrix(fit.x[6:])


def _residual(sample: HandEyeSample, mount: Mount, x: np.ndarray, y: np.ndarray, k: np.ndarray, dist: np.ndarray) -> ViewResidual:
    errors = _reprojection(sample, _camera_board(sample, x, y, mount), k, dist).reshape(-1, 2)
    own = _board_pose(sample, x, mount)
    angle = math.degrees(float(np.linalg.norm(cv2.Rodrigues(own[:3, :3] @ y[:3, :3].T)[0])))
    return ViewResidual(
        sample.label,
        float(np.sqrt(np.mean(np.sum(errors**2, axis=1)))),
        float(np.linalg.norm(own[:3, 3] - y[:3, 3])) * 1000.0,
        angle,
    )
