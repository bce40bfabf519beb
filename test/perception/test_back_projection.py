"""The depth under a pixel comes from the surface the pixel is on, whatever lies around it."""

from __future__ import annotations

import numpy as np
import pytest

from robots.franka.back_projection import NoDepth, point_in_camera, robust_depth
from rpent.runtime.camera import Intrinsics

K = Intrinsics(width=64, height=48, fx=60.0, fy=60.0, cx=31.5, cy=23.5)


def _plane_depth(z0: float = 0.8, slope_per_col: float = 0.0) -> np.ndarray:
    rows, cols = np.mgrid[0:48, 0:64]
    return (z0 + slope_per_col * (cols - 32) + 0 * rows).astype(np.float32)


def test_a_flat_surface_gives_its_depth() -> None:
    assert robust_depth(_plane_depth(0.8), 20, 30, 6).depth_m == pytest.approx(0.8, abs=1e-6)


def test_a_slanted_surface_gives_the_centre_pixels_depth_even_beside_an_edge() -> None:
    depth = _plane_depth(0.8, slope_per_col=0.004)  # 4 mm per pixel, as a face seen at a slant
    depth[:, 33:] = 1.2  # the table far behind, from col 33 on: most of the window right of col 30
    estimate = robust_depth(depth, 20, 30, 6)
    assert estimate.depth_m == pytest.approx(float(depth[20, 30]), abs=0.002)


def test_a_pixel_just_across_an_edge_keeps_its_own_surface() -> None:
    depth = np.full((48, 64), 0.80, np.float32)
    depth[:, 31:] = 0.75  # an object's face from col 31 on; the centre pixel (col 30) is on the background
    assert robust_depth(depth, 20, 30, 6).depth_m == pytest.approx(0.80, abs=1e-6)


def test_a_one_pixel_sliver_of_a_steep_face_keeps_its_own_depth() -> None:
    """Seen from above, a cube's side face is one column between its top and the table."""
    depth = np.full((48, 64), 1.25, np.float32)
    depth[:, :30] = 1.21  # top face
    depth[:, 30] = 1.224  # the side face, seen edge-on
    assert robust_depth(depth, 20, 30, 6).depth_m == pytest.approx(1.224, abs=1e-6)


def test_noise_is_smoothed_on_a_surface() -> None:
    rng = np.random.default_rng(1)
    centre_errors, estimate_errors = [], []
    for _ in range(200):
        depth = _plane_depth(0.4, slope_per_col=0.001) + rng.normal(0.0, 0.001, (48, 64)).astype(np.float32)
        truth = 0.4 + 0.001 * (30 - 32)
        centre_errors.append(abs(float(depth[20, 30]) - truth))
        estimate_errors.append(abs(robust_depth(depth, 20, 30, 6).depth_m - truth))
    assert np.mean(estimate_errors) < 0.6 * np.mean(centre_errors)


def test_a_lone_outlier_at_the_centre_is_outvoted_by_the_surface() -> None:
    depth = _plane_depth(0.8)
    depth[20, 30] = 0.3  # a speckle: one pixel far in front
    assert robust_depth(depth, 20, 30, 6).depth_m == pytest.approx(0.8, abs=1e-6)


def test_holes_are_skipped_and_an_empty_window_says_so() -> None:
    depth = _plane_depth(0.8)
    depth[15:26, 25:36] = 0.0  # no reading under and around the pixel, except at the window's rim
    depth[14, 30] = np.nan
    assert robust_depth(depth, 20, 30, 6).depth_m == pytest.approx(0.8, abs=1e-6)
    with pytest.raises(NoDepth):
        robust_depth(depth, 20, 30, 4)


def test_a_window_at_the_image_corner_is_clipped_to_the_image() -> None:
    assert robust_depth(_plane_depth(0.5), 0, 63, 6).depth_m == pytest.approx(0.5, abs=1e-6)


def test_point_in_camera_is_the_pixel_ray_at_that_depth() -> None:
    point = point_in_camera(K, 23, 43, 2.0)
    assert np.allclose(point, [(43 - 31.5) * 2.0 / 60.0, (23 - 23.5) * 2.0 / 60.0, 2.0])
    # Reprojected, it lands on the same pixel.
    u, v, w = K.matrix() @ point
    assert (u / w, v / w) == pytest.approx((43.0, 23.0))


def test_point_in_camera_undoes_lens_distortion() -> None:
    cv2 = pytest.importorskip("cv2")
    k = Intrinsics(64, 48, 60.0, 60.0, 31.5, 23.5, distortion=(-0.2, 0.05, 0.0, 0.0, 0.0))
    point = point_in_camera(k, 5, 60, 1.5)
    projected, _ = cv2.projectPoints(point.reshape(1, 3), np.zeros(3), np.zeros(3), k.matrix(), np.array(k.distortion))
    assert projected[0, 0] == pytest.approx([60.0, 5.0], abs=1e-3)
    assert point[2] == pytest.approx(1.5)
