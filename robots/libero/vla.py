"""The VLA primitive: let a policy (usually a vla_server over rpent.rpc) drive the arm for a while."""

from __future__ import annotations

from typing import Any

import numpy as np

from robots.libero.arm import LiberoRobot
from robots.libero.control import OnStep, ShouldStop

STOP_CONDITIONS = ("gripper_closed", "object_lifted")
LIFTED_ABOVE_M = 0.05
#: Image size sent to the policy (LIBERO policies are trained on 128 or 256 px frames).
POLICY_IMAGE_PX = 128


def policy_observation(robot: LiberoRobot, with_images: bool) -> dict[str, Any]:
    """The latest observation in robosuite's keys, plus upright camera images when asked."""
    obs = dict(robot.obs)
    if with_images:
        obs["agentview_image"] = robot.render("agentview", POLICY_IMAGE_PX)
        obs["robot0_eye_in_hand_image"] = robot.render("robot0_eye_in_hand", POLICY_IMAGE_PX)
    return obs


def run_policy(
    robot: LiberoRobot,
    instruction: str,
    *,
    max_steps: int,
    stop_when: list[str],
    object_name: str | None,
    with_images: bool,
    should_stop: ShouldStop,
    on_step: OnStep,
) -> dict[str, Any]:
    """Step the env with the policy's action chunks until a stop condition; say which one fired."""
    assert robot.policy is not None
    start_z = float(robot.object_xyz(object_name)[2]) if object_name else None
    steps = chunks = 0

    def stop_reason() -> str | None:
        if should_stop():
            return "cancelled"
        if "gripper_closed" in stop_when and robot.gripper_closed():
            return "gripper_closed"
        lifted = start_z is not None and float(robot.object_xyz(object_name)[2]) - start_z >= LIFTED_ABOVE_M
        if "object_lifted" in stop_when and object_name and lifted:
            return "object_lifted"
        return None

    reason: str | None = None
    while reason is None:
        if steps >= max_steps:
            reason = "step_budget"
            break
        reason = stop_reason()
        if reason:
            break
        chunk = np.asarray(robot.policy.predict(policy_observation(robot, with_images), instruction))
        chunks += 1
        for action in chunk.reshape(-1, chunk.shape[-1]):
            if steps >= max_steps:
                break
            reason = stop_reason()
            if reason:
                break
            result = robot.step(action)
            steps += 1
            on_step(steps)
            if robot.success():
                reason = "task_success"
            elif result.done:
                reason = "episode_done"
            if reason:
                break
    return {"stopped": reason, "steps": steps, "policy_calls": chunks, **robot.pose()}
