"""A robot's "reset before the next task" hook, offered by the dashboard between tasks.

`init_runtime` may return `runtime_kwargs[SCENE_RESET_KEY] = SceneReset(...)`: a simulator puts its
scene back as it started, a real arm goes home. The dashboard runs it (when the operator leaves it
ticked) before each task, in the task's record, and never needs to know the robot.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

SCENE_RESET_KEY = "scene_reset"


@dataclass(frozen=True)
class SceneReset:
    label: str  # what it does, under the "Reset the scene first" checkbox: "arms home, objects back where they started"
    run: Callable[[], str]  # blocks until done; returns what it did, for the log; raises if it could not
    default: bool = True  # ticked by default (simulators); a real arm's home is offered unticked
