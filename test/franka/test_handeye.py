"""Hand-eye solving on synthetic views: known camera and board poses, corners projected with pixel noise."""

from __future__ import annotations

import math

import cv2
import numpy as np
import pytest

from robots.franka import kinematics
from robots.franka.calibration.charuco import BoardDetector, BoardNotFound, BoardSpec, BoardView
from robots.franka.calibration.handeye import CalibrationError, HandEyeSample, solve
from robots.franka.calibration.procedure import QualityLimits
from rpent.runtime.camera import Intrinsics

INTRINSICS = Intrinsics(640, 480, 520.0, 520.0, 319.5, 239.5)
K = INTRINSICS.matrix()
NO_DISTORTION = np.zeros(5)
SPEC = BoardSpec((5, 4), 0.06, 0.045, "DICT_4X4_50")
# Corner grid of SPEC in the board frame.
CORNERS = np.array([[(i + 1) * 0.06, (j + 1) * 0.06, 0.0] for j in range(3) for i in range(4)])


def _angle_deg(a: np.ndarray, b: np.ndarray) -> float:
    return math.degrees(float(np.linalg.norm(cv2.Rodrigues(a[:3, :3] @ b[:3, :3].T)[0])))


def _view(t_camera_board: np.ndarray, rng: np.random.Generator, noise_px: float) -> BoardView:
    rvec = cv2.Rodrigues(t_camera_board[:3, :3])[0]
    pixels, _ = cv2.projectPoints(CORNERS, rvec, t_camera_board[:3, 3], K, NO_DISTORTION)
    pixels = pixels.reshape(-1, 2) + rng.normal(0.0, noise_px, (len(CORNERS), 2))
    ok, r, t = cv2.solvePnP(CORNERS, pixels, K, NO_DISTORTION)
    assert ok
    pnp = np.eye(4)
    pnp[:3, :3], pnp[:3, 3] = cv2.Rodrigues(r)[0], t.reshape(3)
    return BoardView(np.arange(len(CORNERS)), pixels, CORNERS.copy(), pnp, 0.0)


def _flange_poses(count: int, rng: np.random.Generator, tilt_deg: float = 15.0) -> list[np.ndarray]:
    """Flange poses around a hand pointing down at (0.5, 0, 0.5), tilted about random axes."""
    home = kinematics.transform((0.5, 0.0, 0.5), (math.pi, 0.0, 0.0))
    poses = []
    for _ in range(count):
        axis = rng.normal(size=3)
        axis /= np.linalg.norm(axis)
        turn = np.eye(4)
        turn[:3, :3] = kinematics.axis_angle_matrix(axis, math.radians(rng.uniform(5.0, tilt_deg)))
        pose = home @ turn
        pose[:3, 3] += rng.uniform(-0.05, 0.05, 3)
        poses.append(pose)
    return poses


def _wrist_samples(x: np.ndarray, y: np.ndarray, flanges: list[np.ndarray], rng: np.random.Generator, noise_px: float = 0.1):
    return [
        HandEyeSample(f"pose {i}", f, _view(np.linalg.inv(f @ x) @ y, rng, noise_px)) for i, f in enumerate(flanges)
    ]


def test_wrist_camera_pose_on_the_flange_is_recovered_from_noisy_corners() -> None:
    rng = np.random.default_rng(1)
    x = kinematics.transform((0.06, -0.01, 0.04), (0.05, -0.2, 1.6))  # T_flange_camera
    y = kinematics.transform((0.38, -0.12, 0.0), (math.pi, 0.0, 0.1))  # T_base_board, on a table
    result = solve(_wrist_samples(x, y, _flange_poses(10, rng), rng), "wrist", K, NO_DISTORTION)
    assert np.linalg.norm(result.transform[:3, 3] - x[:3, 3]) < 0.0005
    assert _angle_deg(result.transform, x) < 0.05
    assert np.linalg.norm(result.board_pose[:3, 3] - y[:3, 3]) < 0.0005
    assert 0.05 < result.reprojection_rms_px < 0.2  # the added noise, 0.1 px per axis
    assert len(result.views) == 10


def test_fixed_camera_pose_in_the_base_is_recovered_from_a_board_on_the_flange() -> None:
    rng = np.random.default_rng(2)
    x = kinematics.transform((1.3, 0.05, 0.7), (-2.0, 0.0, 1.57))  # T_base_camera, looking back at the arm
    y = kinematics.transform((-0.15, -0.12, 0.12), (0.0, 1.5, 0.0))  # T_flange_board
    flanges = _flange_poses(10, rng)
    samples = [
        HandEyeSample(f"pose {i}", f, _view(np.linalg.inv(x) @ f @ y, rng, 0.1)) for i, f in enumerate(flanges)
    ]
    result = solve(samples, "fixed", K, NO_DISTORTION)
    assert np.linalg.norm(result.transform[:3, 3] - x[:3, 3]) < 0.002
    assert _angle_deg(result.transform, x) < 0.1


def test_a_board_that_moved_between_views_shows_in_the_residuals_and_is_refused() -> None:
    rng = np.random.default_rng(3)
    x = kinematics.transform((0.06, -0.01, 0.04), (0.05, -0.2, 1.6))
    y = kinematics.transform((0.38, -0.12, 0.0), (math.pi, 0.0, 0.1))
    flanges = _flange_poses(8, rng)
    samples = _wrist_samples(x, y, flanges[:4], rng)
    bumped = y @ kinematics.transform((0.02, 0.0, 0.0))  # someone knocked the board 2 cm
    samples += _wrist_samples(x, bumped, flanges[4:], rng)
    result = solve(samples, "wrist", K, NO_DISTORTION)
    problems = QualityLimits().problems(result)
    assert any("--max-reprojection-px" in p for p in problems), problems
    assert any(p.startswith("worst view: pose ") for p in problems)


def test_good_views_pass_the_default_limits() -> None:
    rng = np.random.default_rng(4)
    x = kinematics.transform((0.06, -0.01, 0.04), (0.05, -0.2, 1.6))
    y = kinematics.transform((0.38, -0.12, 0.0), (math.pi, 0.0, 0.1))
    result = solve(_wrist_samples(x, y, _flange_poses(8, rng), rng), "wrist", K, NO_DISTORTION)
    assert QualityLimits().problems(result) == []


def test_too_few_views_are_refused_naming_the_count() -> None:
    rng = np.random.default_rng(5)
    x = kinematics.transform((0.06, 0.0, 0.04))
    y = kinematics.transform((0.4, 0.0, 0.0), (math.pi, 0.0, 0.0))
    with pytest.raises(CalibrationError, match=r"views: 4 usable views, at least 5 needed"):
        solve(_wrist_samples(x, y, _flange_poses(4, rng), rng), "wrist", K, NO_DISTORTION)


def test_poses_turning_about_one_axis_only_are_refused() -> None:
    rng = np.random.default_rng(6)
    x = kinematics.transform((0.06, 0.0, 0.04), (0.0, 0.0, 1.0))
    y = kinematics.transform((0.4, 0.0, 0.0), (math.pi, 0.0, 0.0))
    home = kinematics.transform((0.5, 0.0, 0.5), (math.pi, 0.0, 0.0))
    flanges = [home @ kinematics.transform((0.01 * i, 0.0, 0.0), (0.0, 0.0, 0.2 * i)) for i in range(6)]
    with pytest.raises(CalibrationError, match=r"turns about only one axis"):
        solve(_wrist_samples(x, y, flanges, rng), "wrist", K, NO_DISTORTION)


def test_detector_finds_every_corner_of_a_flat_board_and_names_what_it_misses() -> None:
    image = SPEC.image(px_per_square=80, margin_px=40)
    rgb = np.repeat(image[:, :, None], 3, axis=2)
    h, w = image.shape
    detector = BoardDetector(SPEC, Intrinsics(w, h, 800.0, 800.0, (w - 1) / 2, (h - 1) / 2))
    view = detector.detect(rgb)
    assert sorted(view.corner_ids.tolist()) == list(range(12))
    assert view.reprojection_rms_px < 0.5
    with pytest.raises(BoardNotFound, match=r"0 board corners seen \(0 markers\), at least 6 needed"):
        detector.detect(np.full_like(rgb, 255))


@pytest.mark.parametrize(
    ("kwargs", "field", "rule"),
    [
        ({"squares": (2, 5)}, "squares", "at least 3 x 3"),
        ({"square_m": 0.0}, "square_m", "must be > 0"),
        ({"marker_m": 0.07}, "marker_m", "smaller than the square"),
        ({"dictionary": "DICT_NOPE"}, "dictionary", "unknown ArUco dictionary"),
        ({"squares": (12, 10), "dictionary": "DICT_4X4_50"}, "dictionary", "has 50 markers"),
    ],
)
def test_impossible_boards_are_refused_naming_the_field(kwargs: dict, field: str, rule: str) -> None:
    base = {"squares": (5, 4), "square_m": 0.06, "marker_m": 0.045, "dictionary": "DICT_4X4_50"}
    with pytest.raises(ValueError, match=rule) as info:
        BoardSpec(**{**base, **kwargs})
    assert info.value.field == field  # type: ignore[attr-defined]
