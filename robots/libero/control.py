"""Closed-loop motions on top of LIBERO's 7-D OSC_POSE delta actions.

Each control step reads the latest end-effector pose, sends a saturated proportional delta
(one unit of action asks for 5 cm of position or 0.5 rad of rotation) and stops when within
tolerance, when it stops making progress, when the step budget runs out, or when
`should_stop` says so (a cancel).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from robots.libero.arm import LiberoRobot

METRES_PER_UNIT = 0.05
RADIANS_PER_UNIT = 0.5
#: Proportional gains (fraction of the remaining error asked for per step). Above ~1 the OSC
#: controller overshoots; well below it the last centimetres take many steps.
POSITION_GAIN = 0.9
ROTATION_GAIN = 0.6
#: A motion that has not come 1 mm closer in this many steps is blocked (contact, a held load,
#: the edge of the workspace): it stops instead of spending the rest of its budget.
STALL_STEPS = 20
STALL_PROGRESS_M = 0.001

OnStep = Callable[[int], None]
ShouldStop = Callable[[], bool]


@dataclass
class MotionReport:
    reached: bool
    steps: int
    error_m: float
    yaw_error_deg: float
    stopped: str  # "reached", "stalled", "step_budget" or "cancelled"

    def to_dict(self) -> dict[str, object]:
        return {
            "reached": self.reached,
            "steps": self.steps,
            "position_error_m": round(self.error_m, 4),
            "yaw_error_deg": round(self.yaw_error_deg, 1),
            "stopped": self.stopped,
        }


def move_to(
    robot: LiberoRobot,
    target_xyz: np.ndarray,
    *,
    yaw_rad: float | None = None,
    max_steps: int = 120,
    tolerance_m: float = 0.01,
    should_stop: ShouldStop = lambda: False,
    on_step: OnStep = lambda _: None,
) -> MotionReport:
    """Drive the end effector to `target_xyz` (robot frame) keeping the gripper command as it is.

    With `yaw_rad` None the gripper holds its current yaw; roll and pitch always return to the
    episode's home (pointing down), so a grasp stays vertical.
    """
    target = np.asarray(target_xyz, dtype=np.float64)
    hold_yaw = robot.eef_yaw_rad() if yaw_rad is None else yaw_rad
    target_rot = robot.target_rotation(hold_yaw)
    yaw_tol = np.radians(5.0)
    steps = 0
    best_m, best_step = float("inf"), 0
    while True:
        error = robot.to_world(target) - robot.to_world(robot.eef_xyz())
        rot_error = robot.rotation_error(target_rot)
        distance = float(np.linalg.norm(error))
        rot_distance = float(np.linalg.norm(rot_error))
        if distance <= tolerance_m and rot_distance <= yaw_tol:
            return MotionReport(True, steps, distance, np.degrees(rot_distance), "reached")
        # Turning counts as progress too (1 rad ~ 5 cm), so a pure yaw motion is not "stalled".
        remaining = distance + METRES_PER_UNIT / RADIANS_PER_UNIT * 0.5 * rot_distance
        if remaining < best_m - STALL_PROGRESS_M:
            best_m, best_step = remaining, steps
        elif steps - best_step >= STALL_STEPS:
            return MotionReport(False, steps, distance, np.degrees(rot_distance), "stalled")
        if steps >= max_steps:
            return MotionReport(False, steps, distance, np.degrees(rot_distance), "step_budget")
        if should_stop():
            return MotionReport(False, steps, distance, np.degrees(rot_distance), "cancelled")
        action = np.zeros(7)
        action[:3] = np.clip(POSITION_GAIN * error / METRES_PER_UNIT, -1.0, 1.0)
        action[3:6] = np.clip(ROTATION_GAIN * rot_error / RADIANS_PER_UNIT, -1.0, 1.0)
        action[6] = robot.gripper_command
        robot.step(action)
        steps += 1
        on_step(steps)


def set_gripper(
    robot: LiberoRobot,
    close: bool,
    *,
    steps: int = 15,
    should_stop: ShouldStop = lambda: False,
    on_step: OnStep = lambda _: None,
) -> int:
    """Hold the arm still and command the gripper for `steps` control steps (the fingers need ~10)."""
    action = np.zeros(7)
    action[6] = 1.0 if close else -1.0
    done = 0
    for done in range(1, steps + 1):
        if should_stop():
            return done - 1
        robot.step(action)
        on_step(done)
    return done
