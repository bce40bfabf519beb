"""The LIBERO env server: one LIBERO task behind rpent.rpc, in its own process.

    python -m robots.libero.env_server --endpoint socket://127.0.0.1:0 \
        --suite libero_object --task-id 0 --init-state 0 --seed 0 --camera-size 256

`LiberoEnvFacade` is also usable in-process (it has the same methods as `LiberoEnvClient`),
which is how the benchmark measures the cost of the process boundary.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from typing import Any

import numpy as np

from robots.libero.sim import ACTION_DIM, CAMERAS, SUITES, LiberoSim
from rpent.rpc import BaseEnvClient, BaseEnvFacade, facade_main
from rpent.runtime.env import Observation, StepResult


class LiberoEnvFacade(BaseEnvFacade):
    """Env routes plus `task_info`, `segment` and `sim_state` for one LIBERO task."""

    action_dim = ACTION_DIM

    def __init__(self, sim: LiberoSim) -> None:
        super().__init__()
        self.sim = sim
        self._register_rpc("task_info", self.task_info)
        self._register_rpc("segment", self.segment)
        self._register_rpc("sim_state", self.sim_state)
        self._register_rpc("object_boxes", self.object_boxes)

    def reset(self, *, seed: int | None = None, options: Mapping[str, Any] | None = None) -> Observation:
        options = dict(options or {})
        init_state = options.pop("init_state", None)
        if options:
            raise ValueError(f"options: unknown key(s) {sorted(options)} (allowed: init_state)")
        if init_state is not None and (isinstance(init_state, bool) or not isinstance(init_state, (int, np.integer))):
            raise ValueError(f"options.init_state: must be an integer, got {init_state!r}")
        return self.sim.reset(init_state=None if init_state is None else int(init_state), seed=seed)

    def step(self, action: np.ndarray) -> StepResult:
        obs, reward, done, info = self.sim.step(action)
        return StepResult(obs, reward, done, {**info, "steps": self.sim.steps})

    def cameras(self) -> list[str]:
        return list(CAMERAS)

    def render(self, camera: str, *, width: int | None = None, height: int | None = None) -> np.ndarray:
        return self.sim.render(camera, width, height)

    def success(self) -> bool:
        return self.sim.success()

    def task_info(self) -> dict[str, Any]:
        ref = self.sim.ref
        base_pos, base_quat = self.sim.base_pose()
        return {
            "suite": ref.suite,
            "task_id": ref.task_id,
            "task_name": ref.name,
            "language": ref.language,
            "init_state": self.sim.init_state,
            "n_init_states": ref.n_init_states,
            "seed": self.sim.seed,
            "camera_size": self.sim.camera_size,
            "cameras": list(CAMERAS),
            "objects": list(self.sim.objects),
            "fixtures": list(self.sim.fixtures),
            "goal": self.sim.goal,
            "base_pos": base_pos,
            "base_quat": base_quat,
        }

    def segment(self, camera: str, width: int | None = None, height: int | None = None) -> dict[str, Any]:
        if camera not in CAMERAS:
            raise ValueError(f"camera: {camera!r} is not one of {', '.join(map(repr, CAMERAS))}")
        for name, value in (("width", width), ("height", height)):
            if value is not None and not 1 <= int(value) <= 4096:
                raise ValueError(f"{name}: must be an integer from 1 to 4096, got {value!r}")
        return self.sim.segment(camera, width, height)

    def sim_state(self) -> np.ndarray:
        return self.sim.sim_state()

    def object_boxes(self) -> dict[str, np.ndarray]:
        return self.sim.object_boxes()

    def close(self) -> None:
        self.sim.close()

    @staticmethod
    def add_arguments(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--suite", choices=SUITES, default="libero_object")
        parser.add_argument("--task-id", type=int, default=0)
        parser.add_argument("--init-state", type=int, default=0)
        parser.add_argument("--seed", type=int, default=0)
        parser.add_argument("--camera-size", type=int, default=256, help="default camera image size in pixels")

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> LiberoEnvFacade:
        sim = LiberoSim(
            args.suite, args.task_id, init_state=args.init_state, seed=args.seed, camera_size=args.camera_size
        )
        facade = cls(sim)
        facade.reset()  # serve a ready episode: the first client call need not wait for a reset
        return facade


class LiberoEnvClient(BaseEnvClient):
    """The agent side of LiberoEnvFacade (same methods, over rpent.rpc)."""

    def task_info(self) -> dict[str, Any]:
        return dict(self.call("task_info"))

    def segment(self, camera: str, width: int | None = None, height: int | None = None) -> dict[str, Any]:
        return dict(self.call("segment", [camera, width, height]))

    def sim_state(self) -> np.ndarray:
        return np.asarray(self.call("sim_state"))

    def object_boxes(self) -> dict[str, np.ndarray]:
        return dict(self.call("object_boxes"))


main = facade_main(LiberoEnvFacade, "Serve one LIBERO task (physics without camera observations; cameras on demand).")


if __name__ == "__main__":
    raise SystemExit(main())
