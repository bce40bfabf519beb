"""A motion franky's trajectory generator gives up on halfway is planned again (up to twice) to the same target.

franky-sim on a busy machine sees it about once in ten approach moves: Ruckig finds no trajectory
from the state franky extrapolated after a late control step ("Motion planner failed with error
code -111"), franky stops the arm where it is and join_motion raises. That cannot be provoked on
demand, so here the real motion on franky-sim is cut the way franky cuts it (the arm stopped
partway) and franky's own error is what the wait then meets; everything after it (recover, plan,
check, move, measure) is the real code on franky-sim.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from robots.franka.hardware.franky_arm import FrankyArm
from robots.franka.runtime import FrankaRuntime
from robots.franka.toolkit import FrankaToolkit
from rpent.runtime.types import MotionOutcome

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

CUT_AFTER_S = 0.25  # of motion on the robot's clock before the stand-in failure: the arm is stopped partway


@pytest.fixture(scope="module")
def toolkit(sim_runtime: FrankaRuntime, tmp_path_factory) -> Iterator[FrankaToolkit]:
    kit = FrankaToolkit(robot=sim_runtime, output_dir=tmp_path_factory.mktemp("replan_run"))
    yield kit
    kit.close(timeout=30)


@pytest.fixture
def generator_fails(monkeypatch: pytest.MonkeyPatch, sim_runtime: FrankaRuntime) -> Iterator[Any]:
    """`generator_fails(error, times)`: the next `times` motions stop partway, CUT_AFTER_S into the motion
    on the simulator's clock (the same distance on a quiet machine and a busy one), and end with franky's
    `error`; returns the list of launches (one per motion sent to franky)."""
    launches: list[str] = []
    launched_at_s: list[float] = []
    original_wait, original_launch = FrankyArm.wait, FrankyArm._launch
    sim = sim_runtime.sim
    assert sim is not None

    def arm(error: str, times: int) -> list[str]:
        left = [times]

        def launch(self: FrankyArm, motion: Any) -> None:
            launches.append(type(motion).__name__)
            launched_at_s.append(sim.time_s)
            original_launch(self, motion)

        def wait(self: FrankyArm, timeout_s: float | None = None, cancel: Any = None) -> MotionOutcome:
            if left[0] == 0:
                return original_wait(self, timeout_s, cancel)
            left[0] -= 1
            sim.wait_until(launched_at_s[-1] + CUT_AFTER_S)
            self.stop()  # the arm stopped where it is, as franky stops it
            cut = original_wait(self, 5.0)
            assert cut.stopped and not cut.finished, "the motion ended before the stand-in failure could cut it"
            return self._ended_with(RuntimeError(error))

        monkeypatch.setattr(FrankyArm, "_launch", launch)
        monkeypatch.setattr(FrankyArm, "wait", wait)
        return launches

    yield arm


def _ok(result) -> dict[str, Any]:
    assert result.error is None, result.error
    return result.data["action_result"]


def _start(toolkit: FrankaToolkit) -> np.ndarray:
    _ok(toolkit.execute_tool("home", {}))
    return np.asarray(toolkit.execute_tool("get_state", {}).data["arms"]["arm"]["ee_pose"]["position"])


def test_a_move_the_generator_gave_up_on_twice_reaches_its_target_on_the_third_plan(toolkit, generator_fails, caplog):
    _start(toolkit)
    launches = generator_fails("Motion planner failed with error code -111", times=2)
    with caplog.at_level(logging.WARNING, logger="robots.franka.motion"):
        result = _ok(toolkit.execute_tool("move_to", {"x_m": 0.55, "y_m": 0.12, "z_m": 0.35, "yaw_rad": 0.4}))
    assert launches == ["CartesianWaypointMotion"] * 3
    assert result["reached"] is True and result["cause"] is None
    assert math.dist(result["pose"]["position"], [0.55, 0.12, 0.35]) < 0.005  # measured, at rest
    warnings = [r.getMessage() for r in caplog.records if "planning the same target again" in r.getMessage()]
    assert len(warnings) == 2 and all("Motion planner failed with error code -111" in w for w in warnings)


def test_an_offset_is_not_applied_twice_when_it_is_planned_again(toolkit, generator_fails):
    start = _start(toolkit)
    launches = generator_fails("Motion planner failed with error code -110", times=1)
    result = _ok(toolkit.execute_tool("move_by", {"dx_m": 0.05, "dz_m": -0.08}))
    assert len(launches) == 2 and result["reached"] is True
    # The target is the start plus the offset, not where the arm stopped plus the offset.
    assert np.allclose(result["target"]["position"], start + np.array([0.05, 0.0, -0.08]), atol=1e-4)
    assert math.dist(result["pose"]["position"], result["target"]["position"]) < 0.005


def test_a_third_failure_is_the_calls_error_and_the_arm_is_left_at_rest(toolkit, generator_fails):
    _start(toolkit)
    launches = generator_fails("Motion planner failed with error code -111", times=3)
    result = toolkit.execute_tool("move_to", {"x_m": 0.55, "y_m": -0.12, "z_m": 0.35})
    assert len(launches) == 3
    assert "motion failed: Motion planner failed with error code -111" in result.error
    # Nothing goes on after the error: once at rest the hand is short of the target.
    rest = toolkit.robot.arm().settled_state()
    assert math.dist(rest.pose.position, [0.55, -0.12, 0.35]) > 0.01
    assert toolkit.execute_tool("get_state", {}).data["arms"]["arm"]["moving"] is False


def test_input_the_generator_refuses_is_not_planned_again(toolkit, generator_fails):
    _start(toolkit)
    launches = generator_fails("Motion planner failed with error code -100", times=1)
    result = toolkit.execute_tool("move_to", {"x_m": 0.55, "y_m": 0.0, "z_m": 0.35})
    assert launches == ["CartesianWaypointMotion"]
    assert "motion failed: Motion planner failed with error code -100" in result.error
