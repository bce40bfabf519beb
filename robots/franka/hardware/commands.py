"""What a device was last told to do, for the record's stream (robots.franka.recording).

An arm or gripper notes each command it sends (after the robot took it) in its `commands` log; a
recorder reads the last one, and may listen, to be woken by a policy's step the moment it goes out (so
the stream samples each streamed step once). Notes are immutable and replaced whole: readers on other
threads need no lock.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

Listener = Callable[["Commanded"], None]


@dataclass(frozen=True)
class Commanded:
    """kind: "cartesian" (target pose), "joints" (target joints), "velocity" (a streamed step: joint velocity
    for duration_s, then a brake), "joint_target" (a streamed step to joints), "stop"; for a gripper "grasp",
    "move" (target width). `at_s` is time.monotonic() when it was sent. A streamed step also carries the robot
    clock it was due at (`clock_s`) and the joints and joint velocities its check measured (`joints`, `joint_velocities`):
    the state the step was computed from."""

    kind: str
    at_s: float
    velocity: tuple[float, ...] | None = None
    duration_s: float | None = None
    target: dict[str, Any] | None = None
    width_m: float | None = None
    clock_s: float | None = None
    joints: tuple[float, ...] | None = None
    joint_velocities: tuple[float, ...] | None = None


class CommandLog:
    def __init__(self) -> None:
        self.last: Commanded | None = None
        self._listeners: tuple[Listener, ...] = ()

    def sent(self, kind: str, *, velocity: Sequence[float] | None = None, duration_s: float | None = None,
             target: dict[str, Any] | None = None, width_m: float | None = None, clock_s: float | None = None,
             measured: Any = None) -> None:
        """`measured`: the ArmState a streamed step was computed from."""
        note = Commanded(kind, time.monotonic(), _floats(velocity), duration_s, target, width_m, clock_s,
                         None if measured is None else _floats(measured.joints),
                         None if measured is None else _floats(measured.joint_velocities))
        self.last = note
        for listener in self._listeners:
            try:
                listener(note)
            except Exception:  # a recorder's trouble must never reach the motion
                pass

    def listen(self, listener: Listener) -> Callable[[], None]:
        """Call `listener` with each command sent (on the sender's thread: keep it short); returns the undo."""
        self._listeners = (*self._listeners, listener)

        def unlisten() -> None:
            self._listeners = tuple(x for x in self._listeners if x is not listener)

        return unlisten


def _floats(values: Sequence[float] | None) -> tuple[float, ...] | None:
    return None if values is None else tuple(float(v) for v in values)
