"""A ChArUco board in the simulated scene, for hand-eye calibration against known ground truth.

The board is a thin textured plate: lying on the table (a wrist camera calibrates against it) or
fixed to an arm's flange (a fixed camera watches it move with the hand). It is visual only (no
contacts, no mass), so it changes nothing the arm or the safety envelope feels.
"""

from __future__ import annotations

import tempfile
import threading
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import cv2
import numpy as np

from robots.franka import kinematics
from robots.franka.calibration.charuco import BoardSpec
from rpent.runtime.types import quat_from_matrix

Vec3 = tuple[float, float, float]

# Texture resolution: enough that the renderer's sampling, not the texture, limits corner accuracy.
PX_PER_SQUARE = 128
PLATE_THICKNESS_M = 0.002


@dataclass(frozen=True)
class SimBoard:
    """Where the board is: `mount` "table" (pose in the world frame) or "flange" (pose in arm `arm`'s
    flange frame). The pose is the board frame's (charuco.py): origin at a corner, z into the board."""

    spec: BoardSpec = field(default_factory=BoardSpec)
    mount: Literal["table", "flange"] = "table"
    arm: int = 0
    position_m: Vec3 = (0.45, -0.10, 0.2 + PLATE_THICKNESS_M)
    rpy_rad: Vec3 = (np.pi, 0.0, 0.0)  # on the table: z into the table, so the printed face looks up

    def pose(self) -> np.ndarray:
        """Board frame in its parent (world, or the flange), 4 x 4."""
        return kinematics.transform(self.position_m, self.rpy_rad)

    def add_to(self, sim: Any) -> None:
        """Build the board into `sim`'s scene (robots.franka.sim.world.WorldPart)."""
        add_board(sim, self)


def board_facing(spec: BoardSpec, viewer_in_parent: np.ndarray, centre_in_parent: np.ndarray) -> tuple[Vec3, Vec3]:
    """Position and rpy of a board centred at `centre_in_parent` whose printed face looks at `viewer_in_parent`."""
    z_axis = np.asarray(centre_in_parent, float) - np.asarray(viewer_in_parent, float)  # into the board
    z_axis /= np.linalg.norm(z_axis)
    helper = np.array([0.0, 0.0, 1.0]) if abs(z_axis[2]) < 0.9 else np.array([1.0, 0.0, 0.0])
    x_axis = np.cross(helper, z_axis)
    x_axis /= np.linalg.norm(x_axis)
    rotation = np.column_stack([x_axis, np.cross(z_axis, x_axis), z_axis])
    width, height = spec.size_m
    origin = np.asarray(centre_in_parent, float) - rotation @ np.array([width / 2, height / 2, 0.0])
    return tuple(float(v) for v in origin), _rpy(rotation)  # type: ignore[return-value]


def _rpy(rotation: np.ndarray) -> Vec3:
    """Inverse of kinematics.rpy_matrix (R = Rz(yaw) Ry(pitch) Rx(roll))."""
    pitch = float(np.arcsin(-np.clip(rotation[2, 0], -1.0, 1.0)))
    roll = float(np.arctan2(rotation[2, 1], rotation[2, 2]))
    yaw = float(np.arctan2(rotation[1, 0], rotation[0, 0]))
    return roll, pitch, yaw


# MuJoCo reads textures from files when the scene is compiled, which may be long after it is built:
# one directory for the whole process, removed at exit, holds one image per board.
_TEXTURE_DIR: tempfile.TemporaryDirectory[str] | None = None
_TEXTURE_LOCK = threading.Lock()


def board_texture(spec: BoardSpec) -> Path:
    """The board's image as a PNG file MuJoCo can load (written once per process and board)."""
    global _TEXTURE_DIR
    with _TEXTURE_LOCK:
        if _TEXTURE_DIR is None:
            _TEXTURE_DIR = tempfile.TemporaryDirectory(prefix="rpent-charuco-")
        cols, rows = spec.squares
        png = Path(_TEXTURE_DIR.name) / f"{cols}x{rows}_{spec.square_m:g}_{spec.marker_m:g}_{spec.dictionary}.png"
        if not png.exists():
            image = cv2.cvtColor(spec.image(PX_PER_SQUARE), cv2.COLOR_GRAY2BGR)
            if not cv2.imwrite(str(png), image):
                raise OSError(f"could not write the board texture to {png}")
        return png


def add_board(sim: Any, board: SimBoard) -> None:
    """Add the board's texture, material and plate to a franky-sim MuJoCo scene before it is compiled."""
    asset = sim.scene.find("asset")
    ET.SubElement(asset, "texture", name="charuco_board", type="2d", file=str(board_texture(board.spec)))
    ET.SubElement(asset, "material", name="charuco_board", texture="charuco_board", texrepeat="1 1",
                  texuniform="false", specular="0", shininess="0", reflectance="0")
    if board.mount == "table":
        parent, pose = sim.worldbody, board.pose()
    else:
        parent = _body(sim.worldbody, f"robot{board.arm}_hand")
        # The hand body is the flange turned -45 deg about z (kinematics.FLANGE_TO_HAND).
        pose = np.linalg.inv(kinematics.FLANGE_TO_HAND) @ board.pose()
    width, height = board.spec.size_m
    # The plate's centre, and its top (textured) face on the board's printed side (-z of the board frame).
    centre = pose @ np.array([width / 2, height / 2, PLATE_THICKNESS_M / 2, 1.0])
    # A box's +z face carries the texture upright; the board frame has y down the image and z into
    # the print, so the plate's frame is the board's turned half a turn about x.
    plate = pose[:3, :3] @ kinematics.rpy_matrix(np.pi, 0.0, 0.0)
    quat = quat_from_matrix(plate)
    ET.SubElement(
        parent, "geom", name="charuco_board", type="box",
        size=" ".join(f"{v:.6g}" for v in (width / 2, height / 2, PLATE_THICKNESS_M / 2)),
        pos=" ".join(f"{v:.6g}" for v in centre[:3]),
        quat=" ".join(f"{v:.9g}" for v in (quat[3], quat[0], quat[1], quat[2])),
        material="charuco_board", contype="0", conaffinity="0", mass="0", group="1",
    )  # fmt: skip


def _body(root: ET.Element, name: str) -> ET.Element:
    for body in root.iter("body"):
        if body.get("name") == name:
            return body
    raise KeyError(f"board mount: no body {name!r} in the simulated scene")


# How far in front of the TCP (towards the camera) a flange-held board's centre sits: clear of the fingers.
FLANGE_BOARD_OFFSET_M = 0.08


def board_scene(scene: Any, camera: str, spec: BoardSpec, home_joints: Any, fixed_arm_index: int = 0) -> Any:
    """`scene` cleared of objects, with a board placed for calibrating `camera` from the home pose:
    on the table under the hand for a wrist camera; for a fixed camera, held by the flange of arm
    `fixed_arm_index` in front of the fingers, facing the camera when the arm is at `home_joints`."""
    import dataclasses

    flange = kinematics.flange_pose(home_joints)
    tcp = flange @ kinematics.FLANGE_TO_HAND_TCP
    wrist = next((c for c in scene.wrist_cameras if c.name == camera), None)
    if wrist is not None:
        base = np.asarray(scene.arm_positions[wrist.arm_index], float)
        width, height = spec.size_m
        centre = base + tcp[:3, 3]
        # rpy (pi, 0, 0): board x along world x, y along -y, z into the table.
        origin = (centre[0] - width / 2, centre[1] + height / 2, scene.table_top_z + PLATE_THICKNESS_M)
        board = SimBoard(spec, "table", wrist.arm_index, origin, (np.pi, 0.0, 0.0))
    else:
        fixed = next((c for c in scene.cameras if c.name == camera), None)
        if fixed is None:
            known = [c.name for c in scene.cameras] + [c.name for c in scene.wrist_cameras]
            raise ValueError(f"--camera: no camera named {camera!r} in the simulated scene; known: {known}")
        base = np.asarray(scene.arm_positions[fixed_arm_index], float)
        viewer = np.asarray(fixed.position, float) - base
        towards = (viewer - tcp[:3, 3]) / np.linalg.norm(viewer - tcp[:3, 3])
        to_flange = np.linalg.inv(flange)
        position, rpy = board_facing(
            spec, (to_flange @ [*viewer, 1.0])[:3], (to_flange @ [*(tcp[:3, 3] + towards * FLANGE_BOARD_OFFSET_M), 1.0])[:3]
        )
        board = SimBoard(spec, "flange", fixed_arm_index, position, rpy)
    return dataclasses.replace(scene, objects=(), board=board)
