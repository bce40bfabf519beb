"""Facades and helpers shared by the rpc tests (servers run in-process on 127.0.0.1, port 0)."""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import numpy as np

from rpent.rpc import RpcFacade, RpcServer, serve
from rpent.rpc.facades.env import BaseEnvFacade
from rpent.runtime.env import StepResult


class ProbeFacade(RpcFacade):
    """Echo, raise, block on demand, and record how many handlers run at once."""

    def __init__(self) -> None:
        super().__init__()
        self.release = threading.Event()
        self.entered = threading.Event()
        self.tracked_entered = threading.Event()
        self.closed = False
        self._count_lock = threading.Lock()
        self.active = 0
        self.max_active = 0
        self._register_rpc("echo", self.echo)
        self._register_rpc("fail", self.fail)
        self._register_rpc("block", self.block)
        self._register_rpc("tracked", self.tracked)
        self._register_rpc("unpicklable", lambda: threading.Lock())

    def echo(self, value: Any, *, tag: str = "") -> Any:
        return {"value": value, "tag": tag} if tag else value

    def fail(self, message: str) -> None:
        raise KeyError(message)

    def block(self, timeout_s: float = 10.0) -> str:
        self.entered.set()
        return "released" if self.release.wait(timeout_s) else "gave up"

    def tracked(self, value: np.ndarray) -> np.ndarray:
        self.tracked_entered.set()
        with self._count_lock:
            self.active += 1
            self.max_active = max(self.max_active, self.active)
        try:
            return value * 2
        finally:
            with self._count_lock:
                self.active -= 1

    def close(self) -> None:
        self.closed = True


@contextmanager
def running(facade: RpcFacade, endpoint: str, **kwargs: Any) -> Iterator[RpcServer]:
    server = serve(facade, endpoint, **kwargs)
    try:
        yield server
    finally:
        server.stop()


class PointReachEnv(BaseEnvFacade):
    """A tiny kinematic test env: the hand moves by action[:3] * 5 cm per step, and the task is
    solved when the gripper is closed within 2 cm of the target. Observations carry the
    privileged positions (as LIBERO's do) and a camera image."""

    action_dim = 7

    def __init__(self, target: tuple[float, float, float] = (0.3, -0.2, 0.1)) -> None:
        super().__init__()
        self.target = np.asarray(target, dtype=np.float64)
        self.eef = np.zeros(3)
        self.gripper = -1.0
        self.steps = 0
        self.closed = False

    def _observation(self) -> dict[str, Any]:
        return {
            "robot0_eef_pos": self.eef.copy(),
            "target_pos": self.target.copy(),
            "agentview_image": self.render("agentview"),
        }

    def reset(self, *, seed: int | None = None, options: Mapping[str, Any] | None = None) -> dict[str, Any]:
        start = np.random.default_rng(seed).uniform(-0.1, 0.1, 3) if seed is not None else np.zeros(3)
        self.eef = start
        self.gripper = -1.0
        self.steps = 0
        return self._observation()

    def step(self, action: np.ndarray) -> StepResult:
        self.steps += 1
        self.eef = self.eef + np.clip(action[:3], -1, 1) * 0.05
        self.gripper = float(action[6])
        done = self.success()
        return StepResult(self._observation(), reward=float(done), done=done, info={"steps": self.steps})

    def cameras(self) -> list[str]:
        return ["agentview", "wrist"]

    def render(self, camera: str, *, width: int | None = None, height: int | None = None) -> np.ndarray:
        frame = np.zeros((height or 32, width or 32, 3), dtype=np.uint8)
        frame[..., 0 if camera == "agentview" else 1] = 200
        return frame

    def success(self) -> bool:
        return self.gripper > 0 and float(np.linalg.norm(self.eef - self.target)) < 0.02

    def close(self) -> None:
        self.closed = True
