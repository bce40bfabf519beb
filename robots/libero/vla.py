"""The VLA primitive: let a policy (a vla_server over rpent.rpc, or an openpi server) drive the arm for a while."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from robots.libero.arm import LiberoRobot
from robots.libero.control import OnStep, ShouldStop
from rpent.rpc import RpcError
from rpent.tools import ToolResult

STOP_CONDITIONS = ("gripper_closed", "object_lifted")
LIFTED_ABOVE_M = 0.05
#: Image size sent to the policy (LIBERO policies are trained on 128 or 256 px frames).
POLICY_IMAGE_PX = 128


class PolicyInputError(ValueError):
    """The observation lacks what the policy needs; the message names the argument to change.

    Raised by a policy (e.g. OpenpiLiberoPolicy), caught by run_policy: the contract between the
    two, so it lives here, with the primitive that every LIBERO policy serves.
    """


def policy_observation(robot: LiberoRobot, with_images: bool) -> dict[str, Any]:
    """The latest observation in robosuite's keys, plus upright camera images when asked.

    A policy may name the camera size it wants as ``camera_px`` (openpi's LIBERO models: 256).
    """
    obs = dict(robot.obs)
    if with_images:
        size = int(getattr(robot.policy, "camera_px", POLICY_IMAGE_PX))
        obs["agentview_image"] = robot.render("agentview", size)
        obs["robot0_eye_in_hand_image"] = robot.render("robot0_eye_in_hand", size)
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
    on_cancel: Callable[[Callable[[], Any]], Callable[[], None]] | None = None,
) -> dict[str, Any] | ToolResult:
    """Step the env with the policy's action chunks until a stop condition; say which one fired.

    A policy that fails (unreachable, timed out, a malformed reply) ends the run as a tool error
    naming the cause; the env is stepped no further, so the arm stays where the error found it.
    A policy with ``interrupt()`` gets it from ``on_cancel``, so a cancel need not wait out an inference.
    """
    with _interruptible(robot.policy, on_cancel):
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
            try:
                chunk = np.asarray(robot.policy.predict(policy_observation(robot, with_images), instruction))
            except (RpcError, PolicyInputError) as exc:
                return ToolResult(
                    data={"stopped": "policy_error", "steps": steps, "policy_calls": chunks, **robot.pose()},
                    error=f"the VLA policy failed after {steps} control steps ({chunks} chunks); "
                    f"the arm is stopped where it was: {exc}",
                )
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


@contextmanager
def _interruptible(policy: Any, on_cancel: Callable[[Callable[[], Any]], Callable[[], None]] | None) -> Iterator[None]:
    # Unhooked however the run ends: a cancel that comes later must not interrupt the next run's inference.
    interrupt = getattr(policy, "interrupt", None)
    unhook = on_cancel(interrupt) if on_cancel is not None and interrupt is not None else None
    try:
        yield
    finally:
        if unhook is not None:
            unhook()
