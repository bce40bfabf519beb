"""A kinematic stand-in for LiberoEnvClient: same methods and observation keys, no simulator.

The end effector follows each OSC delta (0.05 m per unit) with a lag, the fingers close over
a few steps and stop on an object within 2 cm, and a held object moves with the hand. It lets
the control and tool logic be tested in milliseconds; the real env is covered by the slow tests.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

import numpy as np

from rpent.runtime.env import StepResult

BASE = np.array([-0.6, 0.0, 0.9])
HOME = np.array([0.45, 0.0, 0.25])
DOWN_XYZW = np.array([1.0, 0.0, 0.0, 0.0])  # gripper pointing down (a half turn about x)
FOLLOW = 0.8  # fraction of the commanded delta the arm achieves per step
OBJECT_WIDTH_M = 0.03


class FakeLiberoEnv:
    def __init__(self) -> None:
        self.step_calls = 0
        self.stepped = threading.Event()
        self.before_step: Any = None  # test hook: called at the start of every step
        self.floor_z: float | None = None  # world z the hand cannot go below (a table in the way)
        self._reset_world()

    def _reset_world(self) -> None:
        self.eef = BASE + HOME
        self.width = 0.08
        self.closing = False
        self.held: str | None = None
        self.objects = {"bowl_1": BASE + np.array([0.6, 0.2, 0.02]), "plate_1": BASE + np.array([0.7, -0.1, 0.0])}

    def reset(self, *, seed: int | None = None, options: Mapping[str, Any] | None = None) -> dict[str, Any]:
        self._reset_world()
        return self._obs()

    def step(self, action: np.ndarray) -> StepResult:
        if self.before_step is not None:
            self.before_step(self.step_calls)
        action = np.asarray(action, dtype=np.float64)
        self.step_calls += 1
        self.eef = self.eef + FOLLOW * 0.05 * np.clip(action[:3], -1, 1)
        if self.floor_z is not None:
            self.eef[2] = max(self.eef[2], self.floor_z)
        self.closing = action[6] > 0
        if self.closing:
            near = [n for n, p in self.objects.items() if np.linalg.norm(p - self.eef) < 0.02]
            floor = OBJECT_WIDTH_M if near or self.held else 0.001
            self.width = max(floor, self.width - 0.02)
            if near and self.width <= OBJECT_WIDTH_M:
                self.held = near[0]
        else:
            self.width = min(0.08, self.width + 0.02)
            self.held = None
        if self.held:
            self.objects[self.held] = self.eef.copy()
        self.stepped.set()
        return StepResult(self._obs(), 0.0, False, {"steps": self.step_calls})

    def _obs(self) -> dict[str, Any]:
        obs: dict[str, Any] = {
            "robot0_eef_pos": self.eef.copy(),
            "robot0_eef_quat": DOWN_XYZW.copy(),
            "robot0_gripper_qpos": np.array([self.width / 2, -self.width / 2]),
            "base_pos": BASE.copy(),
            "base_quat": np.array([0.0, 0.0, 0.0, 1.0]),
        }
        for name, pos in self.objects.items():
            obs[f"{name}_pos"] = pos.copy()
        return obs

    def cameras(self) -> list[str]:
        return ["agentview", "robot0_eye_in_hand"]

    def render(self, camera: str, *, width: int | None = None, height: int | None = None) -> np.ndarray:
        return np.full((height or 64, width or 64, 3), 128, np.uint8)

    def success(self) -> bool:
        bowl, plate = self.objects["bowl_1"], self.objects["plate_1"]
        return bool(np.linalg.norm(bowl[:2] - plate[:2]) < 0.03 and self.held is None)

    def task_info(self) -> dict[str, Any]:
        return {
            "suite": "fake",
            "task_id": 0,
            "task_name": "fake",
            "language": "put the bowl on the plate",
            "init_state": 0,
            "n_init_states": 1,
            "seed": 0,
            "camera_size": 64,
            "cameras": self.cameras(),
            "objects": list(self.objects),
            "fixtures": [],
            "goal": [["on", "bowl_1", "plate_1"]],
            "base_pos": BASE,
            "base_quat": np.array([0.0, 0.0, 0.0, 1.0]),
        }

    def segment(self, camera: str, width: int | None = None, height: int | None = None) -> dict[str, Any]:
        labels = np.zeros((height or 64, width or 64), np.int32)
        labels[10:20, 30:40] = 1  # bowl_1: centroid (34.5, 14.5)
        return {"labels": labels, "names": list(self.objects)}

    def sim_state(self) -> np.ndarray:
        return np.concatenate([self.eef, *self.objects.values()])

    def object_boxes(self) -> dict[str, np.ndarray]:
        half = OBJECT_WIDTH_M / 2
        return {n: np.concatenate([p - half, p + half]) for n, p in self.objects.items()}

    def close(self) -> None:
        pass
