"""The simulated scene as a MuJoCo world: the MJCF franky-sim compiles (robots.franka.sim.simulator.SimScene's
arms, table, cubes and cameras) and camera geometry read back from a compiled model (the optical frame
of a fixed camera, where a wrist camera sits on its arm's flange)."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Iterable
from typing import Any, Protocol

import mujoco
import numpy as np
from franky_sim.mujoco_simulator import MujocoSimulator

Vec3 = tuple[float, float, float]


class WorldPart(Protocol):
    """Something a scene adds to the MuJoCo world before it is compiled: the calibration board
    (robots.franka.calibration.sim_board), which the simulator builds in without knowing what it is."""

    def add_to(self, sim: MujocoSimulator) -> None: ...


def _fmt(values: Iterable[float]) -> str:
    return " ".join(f"{v:.6g}" for v in values)


def _camera_xyaxes(position: Vec3, target: Vec3, up: Vec3 = (0.0, 0.0, 1.0)) -> str:
    """MJCF xyaxes of a camera at `position` looking at `target` with `up` pointing up in its image."""
    forward = np.asarray(target, float) - np.asarray(position, float)
    forward /= np.linalg.norm(forward)
    up = np.asarray(up, float)
    right = np.cross(forward, up)
    if np.linalg.norm(right) < 1e-6:  # looking straight down: pick +y as "up" in the image
        right = np.cross(forward, np.array([-1.0, 0.0, 0.0]))
    right /= np.linalg.norm(right)
    cam_up = np.cross(right, forward)
    return _fmt([*right, *cam_up])


def build_world(scene: Any) -> MujocoSimulator:
    """franky-sim's MuJoCo simulator holding `scene` (a robots.franka.sim.simulator.SimScene): its arms, the table,
    the cubes, the fixed cameras, the wrist cameras on their hands and a calibration board if any;
    not yet compiled."""
    sim = MujocoSimulator()
    sim.init()
    for pos in scene.arm_positions:
        sim.add_robot(position=pos)
    quality = sim.scene.find("visual/quality")
    if quality is not None:
        # Shadows and multisampling cost ~10x per frame offscreen and add nothing to a planner's view.
        quality.set("shadowsize", "0")
        quality.set("offsamples", "0")
    for light in sim.worldbody.findall("light"):
        light.set("castshadow", "false")
    wb = sim.worldbody
    s = scene
    table = ET.SubElement(wb, "body", name="table", pos=_fmt((*s.table_center_xy, s.table_top_z / 2)))
    ET.SubElement(
        table,
        "geom",
        name="table_top",
        type="box",
        size=_fmt((*s.table_half_size_xy, s.table_top_z / 2)),
        rgba="0.62 0.5 0.38 1",
    )
    for obj in s.objects:
        body = ET.SubElement(wb, "body", name=obj.name, pos=_fmt(obj.position))
        if obj.yaw_deg:
            # A quaternion (w x y z) holds whatever angle unit the MJCF compiler is set to.
            half = np.radians(obj.yaw_deg) / 2
            body.set("quat", _fmt((np.cos(half), 0.0, 0.0, np.sin(half))))
        ET.SubElement(body, "freejoint", name=f"{obj.name}_joint")
        ET.SubElement(
            body,
            "geom",
            name=f"{obj.name}_geom",
            type="box",
            size=_fmt([obj.size_m / 2] * 3),
            rgba=_fmt(obj.rgba),
            mass=f"{obj.mass_kg}",
            friction="1.5 0.02 0.001",
            condim="4",
        )
    for cam in s.cameras:
        ET.SubElement(
            wb,
            "camera",
            name=cam.name,
            pos=_fmt(cam.position),
            xyaxes=_camera_xyaxes(cam.position, cam.target),
            fovy=f"{cam.fovy_deg}",
        )
    if s.board is not None:
        s.board.add_to(sim)
    hands = {b.get("name"): b for b in wb.iter("body")}
    for cam in s.wrist_cameras:
        hand = hands.get(f"robot{cam.arm_index}_hand")
        if hand is None:
            raise ValueError(f"wrist camera {cam.name!r}: no arm {cam.arm_index} in the scene")
        # Image "up" is the hand's +x, away from the fingers: they appear at the bottom edge of the picture.
        ET.SubElement(
            hand,
            "camera",
            name=cam.name,
            pos=_fmt(cam.position),
            xyaxes=_camera_xyaxes(cam.position, cam.target, up=(1.0, 0.0, 0.0)),
            fovy=f"{cam.fovy_deg}",
        )
    return sim



# A MuJoCo camera looks along its -z with y up; the OpenCV optical frame looks along +z with y down.
MUJOCO_TO_OPTICAL = np.diag([1.0, -1.0, -1.0, 1.0])


def mujoco_camera_pose(data: Any, cam_id: int) -> np.ndarray:
    """World pose (4 x 4) of a MuJoCo camera's optical frame, OpenCV convention, from `data`."""
    pose = np.eye(4)
    pose[:3, :3] = data.cam_xmat[cam_id].reshape(3, 3)
    pose[:3, 3] = data.cam_xpos[cam_id]
    return pose @ MUJOCO_TO_OPTICAL


def _body_in_parent(model: Any, body_id: int) -> np.ndarray:
    pose = np.eye(4)
    rotation = np.zeros(9)
    mujoco.mju_quat2Mat(rotation, model.body_quat[body_id])
    pose[:3, :3] = rotation.reshape(3, 3)
    pose[:3, 3] = model.body_pos[body_id]
    return pose


def wrist_camera_on_flange(model: Any, name: str) -> tuple[int, np.ndarray]:
    """(arm index, T_flange_camera) of a camera carried by an arm, from the model's own geometry:
    the camera in its body, the bodies up to the arm's link7, and link7 -> flange of the FR3 chain."""
    from robots.franka.kinematics import LINK7_TO_FLANGE

    cam_id = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_CAMERA, name)
    if cam_id < 0:
        raise KeyError(f"no camera named {name!r} in the simulated scene")
    rotation = np.zeros(9)
    mujoco.mju_quat2Mat(rotation, model.cam_quat[cam_id])
    pose = np.eye(4)
    pose[:3, :3] = rotation.reshape(3, 3)
    pose[:3, 3] = model.cam_pos[cam_id]
    pose = pose @ MUJOCO_TO_OPTICAL
    body = int(model.cam_bodyid[cam_id])
    while body > 0:
        body_name = mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_BODY, body) or ""
        if body_name.startswith("robot") and body_name.endswith("_fr3_link7"):
            arm_index = int(body_name[len("robot") : -len("_fr3_link7")])
            return arm_index, np.linalg.inv(LINK7_TO_FLANGE) @ pose
        pose = _body_in_parent(model, body) @ pose
        body = int(model.body_parentid[body])
    raise KeyError(f"camera {name!r} is not carried by an arm")
