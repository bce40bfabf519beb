"""Ports for simulated environments and action policies (VLA models).

An ``Env`` is a simulator stepped with action vectors (LIBERO: 7-D OSC_POSE deltas plus a
gripper command). A ``Policy`` maps an observation and a language instruction to a chunk of
actions. Both may live in this process or behind rpent.rpc (``BaseEnvClient`` and
``BaseVLAClient`` implement these Protocols over the wire), and tools never know which.

Observations are dicts of NumPy arrays and plain values, possibly nested
(e.g. ``{"agentview_image": HxWx3 uint8, "robot0_eef_pos": (3,), "history": {...}}``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import numpy as np

Observation = dict[str, Any]


@dataclass(frozen=True)
class StepResult:
    """What one env step returns. ``done`` means the episode ended (success or time limit)."""

    observation: Observation
    reward: float = 0.0
    done: bool = False
    info: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"observation": self.observation, "reward": self.reward, "done": self.done, "info": self.info}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> StepResult:
        try:
            observation = data["observation"]
        except KeyError:
            raise ValueError("step result: field 'observation' is missing") from None
        if not isinstance(observation, dict):
            raise ValueError(f"step result: 'observation' must be a dict, got {type(observation).__name__}")
        info = data.get("info") or {}
        if not isinstance(info, dict):
            raise ValueError(f"step result: 'info' must be a dict, got {type(info).__name__}")
        return cls(observation, float(data.get("reward", 0.0)), bool(data.get("done", False)), info)


@runtime_checkable
class Env(Protocol):
    """A simulator that is reset, stepped with actions, rendered and asked for success."""

    def reset(self, *, seed: int | None = None, options: Mapping[str, Any] | None = None) -> Observation:
        """Start a new episode (``options`` are env-specific, e.g. a task or init-state index)."""
        ...

    def step(self, action: np.ndarray) -> StepResult:
        """Apply one action vector and advance the simulation by one control step."""
        ...

    def cameras(self) -> list[str]:
        """Names of the cameras ``render`` accepts."""
        ...

    def render(self, camera: str, *, width: int | None = None, height: int | None = None) -> np.ndarray:
        """One RGB frame (H x W x 3, uint8, upright) from ``camera``."""
        ...

    def success(self) -> bool:
        """Ground truth from the simulator: is the task solved now?"""
        ...

    def close(self) -> None: ...


@runtime_checkable
class Policy(Protocol):
    """A closed-loop policy such as a VLA model."""

    def predict(self, observation: Mapping[str, Any], instruction: str) -> np.ndarray:
        """Actions for the next steps: a chunk of shape (T, action_dim), T >= 1."""
        ...

    def reset(self) -> None:
        """Forget episode state (history buffers, latched gripper) before a new episode."""
        ...
