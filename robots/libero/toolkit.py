"""The LIBERO toolkit: observation after each motion, per-step sim states, and the env's own verdict."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Literal

import numpy as np

from robots.libero.arm import LiberoRobot
from robots.libero.tools import LIBERO_TOOLS
from rpent.tools import Command, Toolkit, ToolResult
from rpent.tools.images import encode_png

Mode = Literal["normal", "attempts"]
MODES: tuple[str, ...] = ("normal", "attempts")
OBSERVATION_IMAGE_PX = 256


class LiberoToolkit(Toolkit):
    tools = LIBERO_TOOLS
    robot: LiberoRobot

    def __init__(
        self,
        *,
        mode: Mode = "normal",
        attempts_per_session: int = 1,
        state_output_dir: str | Path | None = None,
        observation_image_px: int = OBSERVATION_IMAGE_PX,
        **kwargs: Any,
    ) -> None:
        if mode not in MODES:
            raise ValueError(f"mode: must be one of {', '.join(MODES)}, got {mode!r}")
        if not 1 <= attempts_per_session <= 100:
            raise ValueError(f"attempts_per_session: must be from 1 to 100, got {attempts_per_session}")
        super().__init__(**kwargs)
        self.state.update(mode=mode, attempts_per_session=attempts_per_session, attempt_results=[])
        self.state_output_dir = Path(state_output_dir) if state_output_dir is not None else None
        if self.state_output_dir is not None:
            self.state_output_dir.mkdir(parents=True, exist_ok=True)
        self.observation_image_px = observation_image_px
        self._observations = 0

    def _capture_observation(
        self, *, command: Command, result: ToolResult, elapsed_s: float
    ) -> tuple[dict[str, Any], dict[str, bytes]]:
        robot = self.robot
        with robot.lock:
            robot.ensure_started()
            observation = {
                "action": command.name,
                "action_result": result.data,
                "elapsed_s": round(elapsed_s, 3),
                **robot.pose(),
                "episode_steps": robot.episode_steps,
            }
            images = {camera: encode_png(robot.render(camera, self.observation_image_px))
                      for camera in ("agentview", "robot0_eye_in_hand")}
            self._observations += 1
            if self.state_output_dir is not None:
                self._save_sim_state(command)
        return observation, images

    def _save_sim_state(self, command: Command) -> None:
        robot = self.robot
        assert self.state_output_dir is not None
        path = self.state_output_dir / f"step_{self._observations:04d}_{command.name}.npz"
        tmp = path.with_suffix(".tmp.npz")
        # Written under a temporary name then renamed, so a reader never sees half a file.
        np.savez_compressed(
            tmp,
            sim_state=robot.env.sim_state(),
            eef_xyz_m=robot.eef_xyz(),
            gripper_width_m=robot.gripper_width_m(),
            episode_steps=robot.episode_steps,
            suite=robot.info["suite"],
            task_id=robot.info["task_id"],
            init_state=robot.info["init_state"],
            tool=command.name,
        )
        os.replace(tmp, path)

    def solved(self) -> bool | None:
        earlier = any(self.state.get("attempt_results", ()))
        return earlier or self.robot.success()
