"""franky-sim in this process: one or more FR3 arms, a table, graspable cubes and fixed cameras.

The simulator speaks the real libfranka protocol on 127.0.0.x, so the same franky code drives
it and a real robot. Stepping runs in our own thread under a lock, so cameras and ground-truth
readers see whole physics steps, never half-written ones.

Run standalone (e.g. to test a client against a separate process):
    python -m robots.franka.sim --arms 2
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

os.environ.setdefault("MUJOCO_GL", "egl")

import mujoco
import numpy as np
from franky_sim import SimulationServer
from franky_sim.franka_gripper_protocol import GripperCommandStatus
from franky_sim.franka_server import BaseCommand
from franky_sim.mujoco_simulator import MujocoSimulator

from rpent.runtime.arm import RuntimeFault

if TYPE_CHECKING:
    from robots.franka.sim_board import SimBoard

Vec3 = tuple[float, float, float]


@dataclass(frozen=True)
class SimObject:
    """A free-floating box; `size_m` is the full edge length, `yaw_deg` its turn about the vertical."""

    name: str
    position: Vec3
    size_m: float = 0.045
    rgba: tuple[float, float, float, float] = (0.85, 0.1, 0.1, 1.0)
    mass_kg: float = 0.05
    yaw_deg: float = 0.0


@dataclass(frozen=True)
class SimCamera:
    """A fixed camera looking from `position` at `target` (world frame)."""

    name: str
    position: Vec3
    target: Vec3
    fovy_deg: float = 50.0


@dataclass(frozen=True)
class SimWristCamera:
    """A camera on arm `arm_index`'s hand, looking from `position` at `target` (both in the hand frame:
    z along the approach axis, fingers closing along y).

    The default sits beside the hand housing, like a RealSense D405 on a bracket, and looks past the
    fingertips at the ground ~0.2 m beyond them, so it sees what the gripper is about to grasp.
    """

    name: str
    arm_index: int = 0
    position: Vec3 = (0.065, 0.0, 0.03)
    target: Vec3 = (0.0, 0.0, 0.30)
    fovy_deg: float = 60.0


TABLE_TOP_Z_M = 0.20
SWITCH_INTERVAL_S = 0.0005


@dataclass(frozen=True)
class SimScene:
    """The world. Arms sit at `arm_positions`; a pose in an arm's base frame is world minus that.

    `seed` is None for the fixed scene below, else the seed robots.franka.scene_layout placed the
    objects with (recorded with each run so a scene can be rebuilt).
    """

    arm_positions: tuple[Vec3, ...] = ((0.0, 0.0, 0.0),)
    table_center_xy: tuple[float, float] = (0.55, 0.0)
    table_half_size_xy: tuple[float, float] = (0.25, 0.45)
    table_top_z: float = TABLE_TOP_Z_M
    objects: tuple[SimObject, ...] = (
        SimObject("cube", (0.50, 0.0, TABLE_TOP_Z_M + 0.0225)),
        SimObject("green_cube", (0.45, 0.17, TABLE_TOP_Z_M + 0.02), 0.04, (0.1, 0.7, 0.2, 1.0)),
        SimObject("blue_cube", (0.58, -0.17, TABLE_TOP_Z_M + 0.02), 0.04, (0.15, 0.3, 0.85, 1.0)),
    )
    cameras: tuple[SimCamera, ...] = (
        # Holds the whole arm at home (its top is at z 0.86 m) above the table, and stays close
        # and low enough that a board held by the hand fills the view for hand-eye calibration.
        SimCamera("front", (1.4, 0.0, 0.82), (0.45, 0.0, 0.45), fovy_deg=58.0),
        SimCamera("top", (0.55, 0.0, 1.45), (0.55, 0.0, 0.2), fovy_deg=45.0),
    )
    seed: int | None = None
    wrist_cameras: tuple[SimWristCamera, ...] = (SimWristCamera("wrist", 0),)
    # A ChArUco board for hand-eye calibration (robots.franka.sim_board), or none.
    board: SimBoard | None = None

    @classmethod
    def dual(cls, spacing_m: float = 0.5) -> SimScene:
        half = spacing_m / 2
        return cls(
            arm_positions=((0.0, half, 0.0), (0.0, -half, 0.0)),
            table_half_size_xy=(0.25, 0.6),
            wrist_cameras=(SimWristCamera("left_wrist", 0), SimWristCamera("right_wrist", 1)),
        )


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


def _abort_pending_on_stop(gripper_server: Any) -> None:
    """Make the simulated hand answer an interrupted move/grasp with "aborted", as a real one does.

    franky-sim 1.0.4 drops the pending command on stop without answering it, so the client's
    call never returns and its connection blocks every later command (and its own teardown).
    """
    original_stop = gripper_server.stop

    def stop(command_id: int, tcp_socket: Any) -> None:
        if gripper_server._pending_command_id is not None and gripper_server._pending_tcp_socket is not None:
            BaseCommand.send_response(
                gripper_server._pending_tcp_socket,
                gripper_server._pending_command_type,
                gripper_server._pending_command_id,
                GripperCommandStatus.kAborted,
                command_type_struct="H",
                status_type_struct="H",
            )
        original_stop(command_id, tcp_socket)

    gripper_server.stop = stop


def default_hostnames() -> Iterator[str]:
    """Loopback addresses to try for the simulated arms, in order (busy ones are skipped)."""
    for b in range(1, 255):
        yield f"127.0.0.{b}"


class FrankaSim:
    """Owns the MuJoCo world and the franky-sim servers; `hosts[i]` is arm i's FCI address."""

    def __init__(
        self, scene: SimScene | None = None, hostnames: Iterable[str] | None = None, realtime: bool = True
    ) -> None:
        self.scene = scene or SimScene()
        self._hostnames = list(hostnames) if hostnames is not None else default_hostnames()
        self._realtime = realtime
        self.lock = threading.Lock()
        self._sim: Any = None
        self._server: Any = None
        self._thread: threading.Thread | None = None
        self._running = False
        self.hosts: list[str] = []
        self.fault: BaseException | None = None

    # --- building ----------------------------------------------------------------------------
    def _build(self) -> Any:
        sim = MujocoSimulator()
        sim.init()
        for pos in self.scene.arm_positions:
            sim.add_robot(position=pos)
        quality = sim.scene.find("visual/quality")
        if quality is not None:
            # Shadows and multisampling cost ~10x per frame offscreen and add nothing to a planner's view.
            quality.set("shadowsize", "0")
            quality.set("offsamples", "0")
        for light in sim.worldbody.findall("light"):
            light.set("castshadow", "false")
        wb = sim.worldbody
        s = self.scene
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
            from robots.franka.sim_board import add_board  # OpenCV draws the board: only when there is one

            add_board(sim, s.board)
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

    def start(self) -> FrankaSim:
        self._sim = self._build()
        self._server = SimulationServer(self._sim, hostname_candidates=self._hostnames)
        try:
            self._server.init()
        except OSError as exc:
            raise RuntimeFault(f"franky-sim could not bind a loopback address: {exc}") from exc
        self.hosts = [rs.hostname for rs in self._server.robot_servers]
        for rs in self._server.robot_servers:
            gripper_server = getattr(rs, "_FrankaRobotServer__gripper_server", None)
            if gripper_server is not None:
                _abort_pending_on_stop(gripper_server)
        # The stepping thread is busy Python: with the default 5 ms GIL switch interval every
        # franky call or render in another thread waits up to 5 ms per GIL hand-over. A shorter
        # interval (process-wide, so only with an in-process sim) keeps tool calls and stops prompt.
        if sys.getswitchinterval() > SWITCH_INTERVAL_S:
            sys.setswitchinterval(SWITCH_INTERVAL_S)
        self._running = True
        self._thread = threading.Thread(target=self._loop, name="franky-sim", daemon=True)
        self._thread.start()
        return self

    def _loop(self) -> None:
        period = 0.001
        next_tick = time.perf_counter()
        try:
            while self._running:
                with self.lock:
                    self._server.run_once(realtime=False)
                if self._realtime:
                    next_tick += period
                    delay = next_tick - time.perf_counter()
                    if delay > 0:
                        time.sleep(delay)
                    else:
                        next_tick = time.perf_counter()  # behind (slow machine): do not try to catch up
        except BaseException as exc:  # surfaced through `fault`; clients see a network timeout
            self.fault = exc

    # --- reading the world ---------------------------------------------------------------------
    @property
    def model(self) -> Any:
        return self._sim.model

    @property
    def data(self) -> Any:
        return self._sim.data

    @property
    def time_s(self) -> float:
        with self.lock:
            return float(self._sim.data.time)

    def body_position(self, name: str) -> np.ndarray:
        """World position [m] of a body (e.g. "cube"), read between physics steps."""
        body_id = mujoco.mj_name2id(self._sim.model, mujoco.mjtObj.mjOBJ_BODY, name)
        if body_id < 0:
            raise KeyError(f"no body named {name!r} in the simulated scene")
        with self.lock:
            return self._sim.data.xpos[body_id].copy()

    def body_pose(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        """World position [m] and orientation (3 x 3) of a body, read between physics steps."""
        body_id = mujoco.mj_name2id(self._sim.model, mujoco.mjtObj.mjOBJ_BODY, name)
        if body_id < 0:
            raise KeyError(f"no body named {name!r} in the simulated scene")
        with self.lock:
            return self._sim.data.xpos[body_id].copy(), self._sim.data.xmat[body_id].reshape(3, 3).copy()

    def hand_tcp_in_arm_frame(self, arm_index: int = 0) -> np.ndarray:
        """Ground truth of arm `arm_index`'s TCP (the Franka Hand's fingertip centre) in its base frame:
        MuJoCo's own pose of the simulated hand body, whatever franky reports. 4 x 4."""
        body_id = mujoco.mj_name2id(self._sim.model, mujoco.mjtObj.mjOBJ_BODY, f"robot{arm_index}_hand")
        if body_id < 0:
            raise KeyError(f"no hand body for arm {arm_index} in the simulated scene")
        with self.lock:
            position = self._sim.data.xpos[body_id].copy()
            rotation = self._sim.data.xmat[body_id].reshape(3, 3).copy()
        pose = np.eye(4)
        pose[:3, :3] = rotation
        pose[:3, 3] = position + rotation[:, 2] * 0.1034 - self.arm_position(arm_index)
        return pose

    def arm_joints(self, arm_index: int = 0) -> np.ndarray:
        """Arm `arm_index`'s seven joint angles as simulated (what franky reports as measured q)."""
        with self.lock:
            return self._sim.data.qpos[self._arm_qpos_addresses(arm_index)].copy()

    def _arm_qpos_addresses(self, arm_index: int) -> list[int]:
        model = self._sim.model
        ids = [mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, f"robot{arm_index}_fr3_joint{i}") for i in range(1, 8)]
        if min(ids) < 0:
            raise KeyError(f"no arm {arm_index} in the simulated scene")
        return [int(model.jnt_qposadr[i]) for i in ids]

    def camera_pose_in_arm_frame(self, name: str, arm_index: int = 0) -> np.ndarray:
        """Ground truth of camera `name`'s optical frame (OpenCV: x right, y down, z forward) in arm
        `arm_index`'s base frame, as MuJoCo renders it now. 4 x 4."""
        cam_id = mujoco.mj_name2id(self._sim.model, mujoco.mjtObj.mjOBJ_CAMERA, name)
        if cam_id < 0:
            raise KeyError(f"no camera named {name!r} in the simulated scene")
        with self.lock:
            pose = mujoco_camera_pose(self._sim.data, cam_id)
        pose[:3, 3] -= self.arm_position(arm_index)
        return pose

    def arm_position(self, index: int) -> np.ndarray:
        return np.asarray(self.scene.arm_positions[index], float)

    def object_in_arm_frame(self, name: str, arm_index: int = 0) -> np.ndarray:
        """Body position in the base frame of arm `arm_index` (arms are placed without rotation)."""
        return self.body_position(name) - self.arm_position(arm_index)

    # --- lifecycle ---------------------------------------------------------------------------
    def close(self) -> None:
        self._running = False
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=5.0)
        if self._server is not None:
            for rs in self._server.robot_servers:
                rs.cleanup()
            self._server = None

    def __enter__(self) -> FrankaSim:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()


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


def scene_model(scene: SimScene | None = None) -> tuple[Any, Any]:
    """The scene's MuJoCo (model, data) with no servers and no stepping: for geometry checks and
    benches that pose the arms themselves (set qpos, then mujoco.mj_forward)."""
    sim = FrankaSim(scene)._build()
    sim.start()
    return sim.model, sim.data


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Run franky-sim with the RPent table scene.")
    parser.add_argument("--arms", type=int, choices=(1, 2), default=1)
    parser.add_argument("--host", action="append", default=[], help="loopback address to bind (repeatable)")
    args = parser.parse_args(argv)
    scene = SimScene() if args.arms == 1 else SimScene.dual()
    sim = FrankaSim(scene, hostnames=args.host or None).start()
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    print("READY " + " ".join(sim.hosts), flush=True)
    try:
        stop.wait()
    except KeyboardInterrupt:
        pass
    finally:
        sim.close()


if __name__ == "__main__":
    main()
