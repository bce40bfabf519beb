"""A scripted planner that picks the red cube with what the tools return and nothing else.

It is the proof that the Franka tools suffice for a pick in a scene it has never seen: it reads
only tool results (the PNG images and the JSON data), never the simulator. It moves the arm out of
the overhead camera's view, finds the red cube in the picture by colour, asks `back_project` where
that pixel is, turns the hand to the cube's edges, descends, grasps, lifts and checks it holds
something before it reports success.

    build_planner("scripted_pick:RedCubePickPlanner")   # with test/franka on sys.path (pytest does it)
"""

from __future__ import annotations

import math
import queue
import time
from dataclasses import dataclass
from typing import Any

import cv2
import numpy as np

from rpent.planner.base import OperatorInput, PlannerResult, PlannerStatus, ScriptPlanner
from rpent.tools import Toolkit, ToolResult

# A pose from which the arm hides nothing on the table from the overhead camera: the hand high up
# and close to the base, pointing down (it projects onto the floor in front of the table's edge).
SURVEY_XYZ_M = (0.32, 0.0, 0.62)
DOWN_RPY = (math.pi, 0.0)        # roll, pitch of a hand pointing straight down
APPROACH_ABOVE_TOP_M = 0.10      # pre-grasp height above the cube's top face
GRASP_BELOW_TOP_M = 0.02         # fingertip centre this far below the top face: pads over the upper half
LIFT_M = 0.10
OPEN_WIDTH_M = 0.08
HELD_MIN_WIDTH_M = 0.02          # the fingers stopped on something at least this wide
SPEED = 0.3
CAMERA = "top"


@dataclass(frozen=True)
class Blob:
    """A coloured region of an image: its brightest face's centre and the turn of its edges."""

    row: float
    col: float
    pixels: int
    edge_angle_deg: float        # minimum-area rectangle of the face, image axes (col right, row down)
    side_px: float


def find_red_blob(png: bytes, min_pixels: int = 12) -> Blob | None:
    """The largest red region of a PNG, by colour: saturated hue near 0/180 in HSV.

    Of that region only its brightest pixels count (under the scene's light from above, a box's
    top face), so the centre is the top face's centre, not the middle of the visible sides.
    """
    bgr = cv2.imdecode(np.frombuffer(png, np.uint8), cv2.IMREAD_COLOR)
    if bgr is None:
        raise ValueError("not a decodable image")
    hsv = cv2.cvtColor(bgr, cv2.COLOR_BGR2HSV)
    hue, sat, val = hsv[..., 0], hsv[..., 1], hsv[..., 2]
    red = ((hue <= 8) | (hue >= 172)) & (sat >= 120) & (val >= 60)
    count, labels, stats, _ = cv2.connectedComponentsWithStats(red.astype(np.uint8), connectivity=8)
    if count < 2:
        return None
    largest = 1 + int(np.argmax(stats[1:, cv2.CC_STAT_AREA]))
    region = labels == largest
    if int(region.sum()) < min_pixels:
        return None
    face = region & (val >= 0.85 * float(val[region].max()))
    rows, cols = np.nonzero(face)
    points = np.stack([cols, rows], axis=1).astype(np.float32)
    (_, _), (w, h), angle = cv2.minAreaRect(points)
    return Blob(float(rows.mean()), float(cols.mean()), int(face.sum()), float(angle), float(max(w, h)))


def grasp_yaw_rad(edge_yaw_rad: float) -> float:
    """Hand yaw (roll pi, pitch 0: fingers close along the hand's y) closing across a box whose edge
    points along `edge_yaw_rad`; a box repeats every 90 degrees, so the turn nearest zero."""
    quarter = math.pi / 2
    return (edge_yaw_rad + quarter / 2) % quarter - quarter / 2


class PickFailed(RuntimeError):
    """A step of the pick did not go as it must; the planner reports failure with this reason."""


class RedCubePickPlanner(ScriptPlanner):
    """Survey, look, back-project, approach, descend, grasp, lift, verify, finish."""

    name = "scripted_pick"

    def __init__(self, **_options: Any) -> None:
        """Options of the model planners (model, base_url, ...) mean nothing to a script."""

    def run(self, toolkit: Toolkit, max_turns: int, input_queue: queue.Queue[OperatorInput] | None) -> PlannerResult:
        self._toolkit = _ToolsOnly(toolkit)
        self._max_turns, self._turns, self._transcript = max_turns, 0, []
        try:
            summary = self._pick()
            status = "success"
        except PickFailed as exc:
            summary, status = str(exc), "failure"
        if self._turns < max_turns:
            self._call("finish", {"status": status, "summary": summary[:2000]})
        finish = dict(self._toolkit.finish_result) if self._toolkit.finish_result is not None else None
        return PlannerResult(
            status=PlannerStatus.FINISHED if finish is not None else PlannerStatus.TURN_LIMIT,
            stop_reason=summary, finish_result=finish, turns=self._turns, transcript=self._transcript,
        )

    # ---- the pick ----------------------------------------------------------------------------

    def _pick(self) -> str:
        roll, pitch = DOWN_RPY
        self._call("open_gripper", {})
        x, y, z = SURVEY_XYZ_M
        self._move(x, y, z, roll, pitch, 0.0)
        shot = self._call("capture_images", {})
        names = _camera_names(shot.data)
        if CAMERA not in names or len(shot.images) != len(names):
            raise PickFailed(f"no {CAMERA!r} image among {names}")
        blob = find_red_blob(shot.images[names.index(CAMERA)])
        if blob is None:
            raise PickFailed("no red region in the top camera's picture")
        top = self._point(blob.row, blob.col)
        yaw = grasp_yaw_rad(self._edge_yaw(blob))
        x, y, top_z = (float(v) for v in top)
        self._move(x, y, top_z + APPROACH_ABOVE_TOP_M, roll, pitch, yaw)
        self._move(x, y, top_z - GRASP_BELOW_TOP_M)
        grasp = _action_result(self._call("grasp", {"width_m": 0.0, "force_n": 20.0}))
        self._call("move_by", {"dz_m": LIFT_M, "speed_factor": SPEED})
        state = self._call("get_state", {}).data
        width = float(next(iter(state["arms"].values()))["gripper"]["width_m"])
        if width < HELD_MIN_WIDTH_M:
            raise PickFailed(f"the gripper closed to {width:.3f} m after lifting: it holds nothing (grasp said {grasp})")
        return (f"Picked the red cube seen at pixel ({blob.row:.0f}, {blob.col:.0f}) of {CAMERA}, top at "
                f"({x:.3f}, {y:.3f}, {top_z:.3f}) m, hand yaw {math.degrees(yaw):.0f} deg; lifted {LIFT_M} m, "
                f"fingers at {width:.3f} m.")

    def _point(self, row: float, col: float) -> np.ndarray:
        """The base-frame point under a pixel of the latest top image, from back_project."""
        data = self._call("back_project", {"camera": CAMERA, "row": round(row), "col": round(col), "radius": 2}).data
        return np.asarray(data["xyz_m"], float)

    def _edge_yaw(self, blob: Blob) -> float:
        """Direction of one of the cube's edges in the base frame: back-project two points on the top
        face, either side of its centre along that edge's direction in the image."""
        step = max(2.0, 0.35 * blob.side_px)
        du, dv = step * math.cos(math.radians(blob.edge_angle_deg)), step * math.sin(math.radians(blob.edge_angle_deg))
        behind = self._point(blob.row - dv, blob.col - du)
        ahead = self._point(blob.row + dv, blob.col + du)
        dx, dy = (ahead - behind)[:2]
        return math.atan2(dy, dx)

    def _move(self, x: float, y: float, z: float, roll: float | None = None, pitch: float | None = None,
              yaw: float | None = None) -> None:
        arguments: dict[str, Any] = {"x_m": x, "y_m": y, "z_m": z, "speed_factor": SPEED}
        for name, value in (("roll_rad", roll), ("pitch_rad", pitch), ("yaw_rad", yaw)):
            if value is not None:
                arguments[name] = value
        result = _action_result(self._call("move_to", arguments))
        if not result.get("reached"):
            raise PickFailed(f"move_to {arguments} did not reach: {result.get('cause')}")

    def _call(self, tool: str, arguments: dict[str, Any]) -> ToolResult:
        if self._turns >= self._max_turns:
            raise PickFailed(f"max_turns={self._max_turns} reached before {tool}")
        self._turns += 1
        started = time.monotonic()
        result = self._toolkit.execute_tool(tool, arguments)
        self._transcript.append({
            "step": self._turns, "tool": tool, "arguments": arguments, "result": result.to_text(),
            "images": result.image_paths, "error": result.error, "duration_s": round(time.monotonic() - started, 4),
        })
        if result.is_error:
            raise PickFailed(f"{tool} failed: {result.error}")
        return result


class _ToolsOnly:
    """The toolkit as a model sees it: tool calls and their results, no way to the robot or simulator."""

    def __init__(self, toolkit: Toolkit) -> None:
        self._execute = toolkit.execute_tool
        self._finish_result = lambda: toolkit.finish_result

    def execute_tool(self, name: str, arguments: dict[str, Any]) -> ToolResult:
        return self._execute(name, arguments)

    @property
    def finish_result(self) -> dict[str, Any] | None:
        return self._finish_result()


def _action_result(result: ToolResult) -> dict[str, Any]:
    """A motion's own result inside the observation that follows it."""
    return result.data.get("action_result", result.data)


def _camera_names(data: dict[str, Any]) -> list[str]:
    """Camera per image, in image order: plain names, or entries with a `name` (or `camera`) field."""
    names = []
    for entry in data.get("cameras", []):
        names.append(entry if isinstance(entry, str) else entry.get("name", entry.get("camera")))
    return names
