"""Scripted DROID policies for ScriptedPolicyServer: each answers an observation with a (10, 8) chunk.

They play openpi's DROID convention from the server's side: joint velocities in [-1, 1] (0.2 rad per
control step at 1) and a gripper position (1 closes). `GoalSeeking` drives the measured joints
through goal configurations (from the simulator's ground truth) and then closes the hand;
`ObservationLog` checks every observation against what a DROID server is sent.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

CHUNK = 10
STEP_RAD_PER_UNIT = 0.2
DROID_KEYS = {
    "observation/exterior_image_1_left": ((224, 224, 3), np.uint8),
    "observation/wrist_image_left": ((224, 224, 3), np.uint8),
    "observation/joint_position": ((7,), np.float64),
    "observation/gripper_position": ((1,), np.float64),
}


def droid_chunk(joint_velocity: Sequence[float], gripper: float = 0.0, rows: int = CHUNK) -> dict[str, Any]:
    action = np.asarray([*joint_velocity, gripper], dtype=np.float32)
    return {"actions": np.tile(action, (rows, 1))}


def observation_problems(obs: dict[str, Any]) -> list[str]:
    """What in `obs` differs from a DROID observation (keys, shapes, dtypes, prompt)."""
    problems = []
    for key, (shape, dtype) in DROID_KEYS.items():
        value = obs.get(key)
        if not isinstance(value, np.ndarray):
            problems.append(f"{key}: missing or not an array ({type(value).__name__})")
        elif value.shape != shape or value.dtype != dtype:
            problems.append(f"{key}: {value.shape} {value.dtype}, expected {shape} {np.dtype(dtype)}")
    if not isinstance(obs.get("prompt"), str):
        problems.append("prompt: missing or not a string")
    extra = set(obs) - set(DROID_KEYS) - {"prompt"}
    if extra:
        problems.append(f"unexpected keys {sorted(extra)}")
    return problems


class GoalSeeking:
    """Joint velocities toward each goal in turn (at most `max_step_rad[goal]` per step), then close the hand.

    Server-side checks: every observation is a DROID one. The rows past `horizon` of each chunk
    reverse every joint at full speed (over any velocity limit): a client that executed more than
    `horizon` actions of a chunk would be refused or thrown back, never reach the goal.
    """

    def __init__(self, goals: Sequence[Sequence[float]], *, max_step_rad: Sequence[float] = (0.03, 0.01),
                 reached_rad: float = 0.005, passed_rad: float = 0.015, horizon: int = 8) -> None:
        self.goals = [np.asarray(g, dtype=float) for g in goals]
        self.max_step_rad = list(max_step_rad)  # per goal: slower on the way down to the table
        self.reached_rad = reached_rad  # the last goal; the ones on the way count as passed within passed_rad
        self.passed_rad = passed_rad
        self.horizon = horizon
        self.goal = 0
        self.problems: list[str] = []
        self.prompts: list[str] = []

    def __call__(self, obs: dict[str, Any], index: int) -> dict[str, Any]:
        self.problems += [f"observation {index}: {p}" for p in observation_problems(obs)]
        self.prompts.append(str(obs.get("prompt")))
        q = np.asarray(obs["observation/joint_position"], dtype=float)
        while self.goal < len(self.goals) - 1 and np.max(np.abs(self.goals[self.goal] - q)) < self.passed_rad:
            self.goal += 1
        error = self.goals[self.goal] - q
        done = self.goal == len(self.goals) - 1 and np.max(np.abs(error)) < self.reached_rad
        cap = self.max_step_rad[min(self.goal, len(self.max_step_rad) - 1)]
        step = np.zeros(7) if done else np.clip(error / self.horizon, -cap, cap)
        reply = droid_chunk(step / STEP_RAD_PER_UNIT, 1.0 if done else 0.0)
        reply["actions"][self.horizon:, :7] = -np.where(step >= 0, 1.0, -1.0)
        return reply


class Constant:
    """The same joint velocity action every time (hostile policies: into the table, too fast ...)."""

    def __init__(self, joint_velocity: Sequence[float], gripper: float = 0.0) -> None:
        self.reply = droid_chunk(joint_velocity, gripper)
        self.calls = 0

    def __call__(self, obs: dict[str, Any], index: int) -> dict[str, Any]:
        self.calls += 1
        return self.reply


class Reaching:
    """What a real DROID checkpoint sends from rest: joint velocities of up to `units` (0.3-0.6 in
    pi0-FAST-DROID and pi05-DROID replies) straight towards `goal`, each row planned as if the one before
    ran exactly (DROID's q + 0.2 rad per unit), then zeros once there. Above 1/3 unit a row asks for more
    than the default 1 rad/s cap: the arm runs it shaped down, never refused."""

    def __init__(self, goal: Sequence[float], units: float = 0.5, reached_rad: float = 0.01) -> None:
        self.goal = np.asarray(goal, dtype=float)
        self.units = units
        self.reached_rad = reached_rad
        self.reached = False

    def __call__(self, obs: dict[str, Any], index: int) -> dict[str, Any]:
        q = np.asarray(obs["observation/joint_position"], dtype=float)
        self.reached = self.reached or bool(np.max(np.abs(self.goal - q)) < self.reached_rad)
        rows = []
        for _ in range(CHUNK):
            action = np.zeros(7) if self.reached else np.clip(
                (self.goal - q) / STEP_RAD_PER_UNIT, -self.units, self.units)
            rows.append([*action, 0.0])
            q = q + action * STEP_RAD_PER_UNIT
        return {"actions": np.asarray(rows, dtype=np.float32)}


class Reversing:
    """`units` on `joint` for the first half of every chunk and minus `units` for the rest: a policy that
    turns a joint round in one step (0.3 units: +0.9 to -0.9 rad/s, 27 rad/s^2 if run as asked)."""

    def __init__(self, joint: int = 0, units: float = 0.3, horizon: int = 8) -> None:
        self.joint, self.units, self.horizon = joint, units, horizon

    def __call__(self, obs: dict[str, Any], index: int) -> dict[str, Any]:
        rows = np.zeros((CHUNK, 8), dtype=np.float32)
        rows[: self.horizon // 2, self.joint] = self.units
        rows[self.horizon // 2:, self.joint] = -self.units
        return {"actions": rows}
