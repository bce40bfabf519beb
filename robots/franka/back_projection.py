"""From a pixel of a depth image to a 3-D point: a robust depth under the pixel, then its ray.

The depth is read from the *dominant surface* around the pixel, not the pixel alone, so a hole,
a noisy reading or a pixel just across an object's edge does not move the point:

1. The valid depths in a (2 radius + 1)^2 window are split into surfaces where sorted depths jump
   by more than a tolerance. The surface under the centre pixel is kept, unless the centre has no
   reading or is a lone outlier: then the largest surface.
2. On the centre's surface: the median of the centre and of those pairs of pixels mirrored about
   it (within 2 pixels) that both lie close to its depth. Mirrored pairs keep a slanted face's
   median at the centre's own depth, and a pair that straddles an edge is left out whole, so
   neither the slant nor the edge biases it; what remains smooths noise.
3. Otherwise: the median of the chosen surface's readings nearest the centre.

The point is then the centre pixel's own ray at that depth.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rpent.runtime.camera import Intrinsics

# Two depths belong to one surface when they differ by less than this (metres, and fraction of depth):
# tighter than the smallest object the tools handle (2 cm), looser than a slanted face across a pixel.
SURFACE_GAP_M = 0.004
SURFACE_GAP_FRACTION = 0.015
# The centre pixel's surface must hold this share of the window's readings to outvote the largest one.
CENTRE_SURFACE_MIN_SHARE = 0.1
# How many of the surface's pixels, nearest the centre first, the median is taken over (step 3).
NEAREST_PIXELS = 9
# Step 2: a mirrored pair counts when both its depths are this close to the centre's.
PAIR_GAP_M = 0.003
PAIR_GAP_FRACTION = 0.006
_PAIR_OFFSETS = [(dr, dc) for dr in range(0, 3) for dc in range(-2, 3) if (dr, dc) > (0, 0)]


class NoDepth(ValueError):
    """No valid depth reading around the pixel."""


@dataclass(frozen=True)
class DepthEstimate:
    depth_m: float
    pixels: int  # readings on the chosen surface in the window


def robust_depth(depth_m: np.ndarray, row: int, col: int, radius: int) -> DepthEstimate:
    """Depth (metres along the optical axis) of the dominant surface at (row, col); NoDepth if none."""
    height, width = depth_m.shape
    top, bottom = max(0, row - radius), min(height, row + radius + 1)
    left, right = max(0, col - radius), min(width, col + radius + 1)
    window = np.asarray(depth_m[top:bottom, left:right], dtype=np.float64)
    rows, cols = np.mgrid[top:bottom, left:right]
    valid = np.isfinite(window) & (window > 0)
    if not valid.any():
        raise NoDepth(f"no valid depth within {radius} pixels")
    values = window[valid]
    ring = np.maximum(np.abs(rows[valid] - row), np.abs(cols[valid] - col))

    order = np.argsort(values)
    sorted_values = values[order]
    gaps = np.diff(sorted_values) > SURFACE_GAP_M + SURFACE_GAP_FRACTION * sorted_values[:-1]
    labels = np.empty(values.size, dtype=np.int64)
    labels[order] = np.concatenate(([0], np.cumsum(gaps)))
    counts = np.bincount(labels)

    chosen = int(np.argmax(counts))
    centre = float(depth_m[row, col])
    if np.isfinite(centre) and centre > 0:
        centre_label = int(labels[np.flatnonzero(ring == 0)[0]])
        if counts[centre_label] >= CENTRE_SURFACE_MIN_SHARE * values.size:
            return DepthEstimate(_mirrored_median(depth_m, row, col, min(radius, 2)), int(counts[centre_label]))
    members = labels == chosen
    nearest = np.argsort(ring[members], kind="stable")[:NEAREST_PIXELS]
    return DepthEstimate(float(np.median(values[members][nearest])), int(members.sum()))


def _mirrored_median(depth_m: np.ndarray, row: int, col: int, reach: int) -> float:
    height, width = depth_m.shape
    centre = float(depth_m[row, col])
    tight = PAIR_GAP_M + PAIR_GAP_FRACTION * centre
    picked = [centre]
    for dr, dc in _PAIR_OFFSETS:
        if max(abs(dr), abs(dc)) > reach:
            continue
        r1, c1, r2, c2 = row + dr, col + dc, row - dr, col - dc
        if not (0 <= r1 < height and 0 <= r2 < height and 0 <= c1 < width and 0 <= c2 < width):
            continue
        a, b = float(depth_m[r1, c1]), float(depth_m[r2, c2])
        if abs(a - centre) <= tight and abs(b - centre) <= tight:  # False for NaN and for no reading
            picked += [a, b]
    return float(np.median(picked))


def point_in_camera(intrinsics: Intrinsics, row: int, col: int, depth_m: float) -> np.ndarray:
    """The point at `depth_m` along pixel (row, col)'s ray, in the optical frame (no distortion model:
    undistort with OpenCV first if the camera has one)."""
    if intrinsics.distortion and any(abs(k) > 0 for k in intrinsics.distortion):
        import cv2

        undistorted = cv2.undistortPoints(
            np.array([[[float(col), float(row)]]]), intrinsics.matrix(), np.asarray(intrinsics.distortion)
        )[0, 0]
        return np.array([undistorted[0] * depth_m, undistorted[1] * depth_m, depth_m])
    return intrinsics.ray(float(row), float(col)) * depth_m


def to_frame(transform: np.ndarray, point: np.ndarray) -> np.ndarray:
    return transform[:3, :3] @ point + transform[:3, 3]
