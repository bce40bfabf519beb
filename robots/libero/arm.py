"""The agent-side LIBERO runtime: an env (remote or local), an optional VLA, and frame bookkeeping.

Tools see positions in the robot base frame (see robots.libero.sim) and yaw relative to the
gripper's orientation at the start of the episode; this class converts to and from the
simulator's world frame and keeps the latest observation.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any, Protocol

import numpy as np
from scipy.spatial.transform import Rotation

from rpent.runtime.env import Policy

#: Finger opening (metres) of a closed gripper that holds something: closed on nothing it is
#: 1-2.5 mm, on a bowl's rim about 5-7 mm.
HOLDING_ABOVE_M = 0.004


class LiberoEnv(Protocol):
    """What LiberoEnvClient and LiberoEnvFacade both provide."""

    def reset(self, *, seed: int | None = None, options: Mapping[str, Any] | None = None) -> dict[str, Any]: ...
    def step(self, action: np.ndarray) -> Any: ...
    def render(self, camera: str, *, width: int | None = None, height: int | None = None) -> np.ndarray: ...
    def success(self) -> bool: ...
    def task_info(self) -> dict[str, Any]: ...
    def segment(self, camera: str, width: int | None = None, height: int | None = None) -> dict[str, Any]: ...
    def sim_state(self) -> np.ndarray: ...
    def object_boxes(self) -> dict[str, np.ndarray]: ...


def _rounded(values: Any) -> list[float]:
    return [round(float(v), 4) for v in values]


class LiberoRobot:
    """What `ctx.robot` is for LIBERO tools. One lock serialises env access across tool calls."""

    def __init__(self, env: LiberoEnv, *, policy: Policy | None = None) -> None:
        self.env = env
        self.policy = policy
        self.lock = threading.RLock()
        self.info = env.task_info()
        self.objects: list[str] = list(self.info["objects"])
        self.fixtures: list[str] = list(self.info["fixtures"])
        self.language: str = str(self.info["language"])
        self.obs: dict[str, Any] = {}
        self.home_rot: Rotation | None = None
        self.gripper_command = -1.0
        self.episode_steps = 0

    # -- episode ---------------------------------------------------------------------------
    def reset(self, *, init_state: int | None = None) -> dict[str, Any]:
        with self.lock:
            options = {"init_state": init_state} if init_state is not None else None
            self._set_obs(self.env.reset(options=options))
            if init_state is not None:
                self.info["init_state"] = init_state
            self.home_rot = self._eef_rot_world()
            self.gripper_command = -1.0
            self.episode_steps = 0
            if self.policy is not None:
                self.policy.reset()
            return self.obs

    def ensure_started(self) -> None:
        # Before the first reset there is no observation (nor a home orientation): start an episode.
        if not self.obs:
            self.reset()

    def step(self, action: np.ndarray) -> Any:
        with self.lock:
            result = self.env.step(np.asarray(action, dtype=np.float64))
            self._set_obs(result.observation)
            self.gripper_command = float(action[-1])
            self.episode_steps += 1
            return result

    def _set_obs(self, obs: dict[str, Any]) -> None:
        self.obs = obs
        self._base_pos = np.asarray(obs["base_pos"], dtype=np.float64)
        self._base_rot = Rotation.from_quat(np.asarray(obs["base_quat"], dtype=np.float64))

    # -- frames ----------------------------------------------------------------------------
    def to_robot(self, world_xyz: Any) -> np.ndarray:
        return self._base_rot.inv().apply(np.asarray(world_xyz, dtype=np.float64) - self._base_pos)

    def to_world(self, robot_xyz: Any) -> np.ndarray:
        return self._base_rot.apply(np.asarray(robot_xyz, dtype=np.float64)) + self._base_pos

    def _eef_rot_world(self) -> Rotation:
        # robosuite quaternions are (x, y, z, w), scipy's order too.
        return Rotation.from_quat(np.asarray(self.obs["robot0_eef_quat"], dtype=np.float64))

    # -- readings (robot frame) ------------------------------------------------------------
    def eef_xyz(self) -> np.ndarray:
        return self.to_robot(self.obs["robot0_eef_pos"])

    def eef_yaw_rad(self) -> float:
        """Rotation of the gripper about the base z axis since the episode started."""
        relative = self._eef_rot_world() * self.home_rot.inv()
        return float(relative.as_euler("xyz")[2])

    def target_rotation(self, yaw_rad: float) -> Rotation:
        """World orientation of the home grasp pose turned by `yaw_rad` about the base z axis."""
        turn = self._base_rot * Rotation.from_euler("z", yaw_rad) * self._base_rot.inv()
        return turn * self.home_rot

    def rotation_error(self, target: Rotation) -> np.ndarray:
        """Axis-angle (world frame, radians) that takes the current gripper orientation to `target`."""
        return (target * self._eef_rot_world().inv()).as_rotvec()

    def gripper_width_m(self) -> float:
        qpos = np.asarray(self.obs["robot0_gripper_qpos"], dtype=np.float64)
        return float(abs(qpos[0] - qpos[1]))

    def gripper_closed(self) -> bool:
        return self.gripper_command > 0

    def object_xyz(self, name: str) -> np.ndarray:
        key = f"{name}_pos"
        if key not in self.obs:
            raise KeyError(name)
        return self.to_robot(self.obs[key])

    def object_table(self) -> dict[str, dict[str, list[float]]]:
        """Each task object's reference point and bounding box, robot frame, metres."""
        boxes = self.env.object_boxes()
        table: dict[str, dict[str, list[float]]] = {}
        for name in self.objects:
            if f"{name}_pos" not in self.obs:
                continue
            entry = {"xyz_m": _rounded(self.object_xyz(name))}
            if name in boxes:
                box = np.asarray(boxes[name], dtype=np.float64)
                # LIBERO's robot bases are not rotated about z, so the box stays axis-aligned here.
                entry["box_min_m"] = _rounded(self.to_robot(box[:3]))
                entry["box_max_m"] = _rounded(self.to_robot(box[3:]))
            table[name] = entry
        return table

    def pose(self) -> dict[str, Any]:
        return {
            "eef_xyz_m": [round(float(v), 4) for v in self.eef_xyz()],
            "eef_yaw_deg": round(float(np.degrees(self.eef_yaw_rad())), 1),
            "gripper": "closed" if self.gripper_closed() else "open",
            "gripper_width_m": round(self.gripper_width_m(), 4),
            "holding_something": self.gripper_closed() and self.gripper_width_m() > HOLDING_ABOVE_M,
        }

    # -- cameras ---------------------------------------------------------------------------
    def render(self, camera: str, size: int | None = None) -> np.ndarray:
        with self.lock:
            return self.env.render(camera, width=size, height=size)

    def success(self) -> bool:
        with self.lock:
            return bool(self.env.success())
