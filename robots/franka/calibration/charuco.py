"""The ChArUco calibration board: its description, its printable image, and finding it in a picture.

A ChArUco board is a chessboard whose white squares carry ArUco markers: the markers say which
corner is which (so a partly hidden or tilted board still gives labelled corners), the chessboard
corners give sub-pixel accuracy. Board frame (OpenCV's): origin at the board's outer corner next to
the first square, x along the columns, y along the rows, z into the board (away from the viewer).
"""

from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np

from rpent.runtime.camera import Intrinsics

# Fewer corners than this and a board's pose is too weakly determined to calibrate with
# (six is what the PnP and the collinearity check need with margin).
MIN_CORNERS = 6


class BoardSpecError(ValueError):
    """A board description that cannot be; `field` names the BoardSpec field."""

    def __init__(self, field: str, rule: str) -> None:
        self.field = field
        self.rule = rule
        super().__init__(f"board {field}: {rule}")


@dataclass(frozen=True)
class BoardSpec:
    """A ChArUco board: `squares` (columns, rows), square and marker edges in metres, ArUco dictionary.

    The default (30 x 24 cm, fits on A3) stays readable for a 320 x 240 camera from 0.8 m: 4 x 4 bit
    markers of 4.5 cm are ~13 px there.
    """

    squares: tuple[int, int] = (5, 4)
    square_m: float = 0.06
    marker_m: float = 0.045
    dictionary: str = "DICT_4X4_50"

    def __post_init__(self) -> None:
        cols, rows = self.squares
        if cols < 3 or rows < 3:
            raise BoardSpecError("squares", f"need at least 3 x 3 squares, got {cols} x {rows}")
        if not self.square_m > 0:
            raise BoardSpecError("square_m", f"must be > 0, got {self.square_m * 1000:g} mm")
        if not 0 < self.marker_m < self.square_m:
            raise BoardSpecError(
                "marker_m", f"must be > 0 and smaller than the square ({self.square_m * 1000:g} mm), got {self.marker_m * 1000:g} mm"
            )
        if not self.dictionary.startswith("DICT_") or not hasattr(cv2.aruco, self.dictionary):
            raise BoardSpecError("dictionary", f"unknown ArUco dictionary {self.dictionary!r} (e.g. DICT_5X5_100)")
        markers = (cols * rows) // 2
        size = cv2.aruco.getPredefinedDictionary(getattr(cv2.aruco, self.dictionary)).bytesList.shape[0]
        if markers > size:
            raise BoardSpecError("dictionary", f"{self.dictionary} has {size} markers, a {cols} x {rows} board needs {markers}")

    @property
    def size_m(self) -> tuple[float, float]:
        """Width (along the columns) and height of the squared area."""
        return self.squares[0] * self.square_m, self.squares[1] * self.square_m

    def board(self) -> cv2.aruco.CharucoBoard:
        dictionary = cv2.aruco.getPredefinedDictionary(getattr(cv2.aruco, self.dictionary))
        return cv2.aruco.CharucoBoard(self.squares, self.square_m, self.marker_m, dictionary)

    def image(self, px_per_square: int, margin_px: int = 0) -> np.ndarray:
        """The board as a grey uint8 image, `px_per_square` pixels per square, `margin_px` white border."""
        cols, rows = self.squares
        size = (cols * px_per_square + 2 * margin_px, rows * px_per_square + 2 * margin_px)
        return self.board().generateImage(size, marginSize=margin_px, borderBits=1)


@dataclass(frozen=True)
class BoardView:
    """The board found in one picture: labelled corners and the board's pose in the camera's optical frame."""

    corner_ids: np.ndarray  # (N,) int
    image_points: np.ndarray  # (N, 2) float, pixels
    object_points: np.ndarray  # (N, 3) float, board frame, metres
    T_camera_board: np.ndarray  # 4 x 4
    reprojection_rms_px: float


class BoardNotFound(ValueError):
    """The board is not (or not well enough) visible in a picture; the message says what was seen."""


class BoardDetector:
    """Finds one board in RGB pictures of a camera with known intrinsics."""

    def __init__(self, spec: BoardSpec, intrinsics: Intrinsics) -> None:
        self.spec = spec
        self.intrinsics = intrinsics
        self._board = spec.board()
        self._detector = cv2.aruco.CharucoDetector(self._board)
        self._k = intrinsics.matrix()
        self._dist = np.asarray(intrinsics.distortion or (0.0,) * 5, dtype=float)

    def detect(self, rgb: np.ndarray) -> BoardView:
        """The board in `rgb` (H x W x 3 uint8); BoardNotFound when too few corners are seen."""
        grey = cv2.cvtColor(np.ascontiguousarray(rgb), cv2.COLOR_RGB2GRAY)
        corners, ids, _marker_corners, marker_ids = self._detector.detectBoard(grey)
        markers = 0 if marker_ids is None else len(marker_ids)
        count = 0 if ids is None else len(ids)
        if count < MIN_CORNERS:
            raise BoardNotFound(f"{count} board corners seen ({markers} markers), at least {MIN_CORNERS} needed")
        if self._board.checkCharucoCornersCollinear(ids):
            raise BoardNotFound(f"the {count} board corners seen lie on one line")
        object_points, image_points = self._board.matchImagePoints(corners, ids)
        object_points = object_points.reshape(-1, 3).astype(float)
        image_points = image_points.reshape(-1, 2).astype(float)
        ok, rvec, tvec = cv2.solvePnP(object_points, image_points, self._k, self._dist, flags=cv2.SOLVEPNP_IPPE)
        if not ok:
            raise BoardNotFound(f"{count} corners seen but no board pose fits them")
        rvec, tvec = cv2.solvePnPRefineLM(object_points, image_points, self._k, self._dist, rvec, tvec)
        projected, _ = cv2.projectPoints(object_points, rvec, tvec, self._k, self._dist)
        rms = float(np.sqrt(np.mean(np.sum((projected.reshape(-1, 2) - image_points) ** 2, axis=1))))
        return BoardView(ids.reshape(-1).astype(int), image_points, object_points, to_matrix(rvec, tvec), rms)


def to_matrix(rvec: np.ndarray, tvec: np.ndarray) -> np.ndarray:
    """4 x 4 from an OpenCV rotation vector and translation."""
    matrix = np.eye(4)
    matrix[:3, :3] = cv2.Rodrigues(np.asarray(rvec, dtype=float).reshape(3))[0]
    matrix[:3, 3] = np.asarray(tvec, dtype=float).reshape(3)
    return matrix
