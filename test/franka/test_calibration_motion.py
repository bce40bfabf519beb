"""How a calibration treats a motion that did not go through: refused (skipped), the trajectory generator
gave up (recover, try once more), the robot ended it (stop the calibration, naming the pose)."""

from __future__ import annotations

from typing import Any

import franky
import pytest

from robots.franka.calibration import procedure as calibration
from robots.franka.calibration.poses import CalibrationPose
from robots.franka.calibration.procedure import CalibrationRun, _visit
from rpent.runtime.arm import MotionRefused, RuntimeFault
from rpent.runtime.types import Pose

POSE = CalibrationPose("tilted", tcp=Pose((0.5, 0.0, 0.45), (1.0, 0.0, 0.0, 0.0)))


class _Arm:
    def __init__(self) -> None:
        self.recoveries = 0

    def recover(self) -> bool:
        self.recoveries += 1
        return True


class _Robot:
    def __init__(self) -> None:
        self._arm = _Arm()

    def arm(self, name: str | None = None) -> _Arm:
        return self._arm


class _Ctx:
    def __init__(self) -> None:
        self.robot = _Robot()


def _moves(monkeypatch: pytest.MonkeyPatch, *failures: BaseException) -> list[int]:
    """actions.move_to raising `failures` in turn, then reaching its target; returns the call count."""
    calls = [0]

    def move_to(*args: Any, **kwargs: Any) -> dict[str, Any]:
        calls[0] += 1
        if calls[0] <= len(failures):
            raise failures[calls[0] - 1]
        return {"reached": True, "cause": None}

    monkeypatch.setattr(calibration.actions, "move_to", move_to)
    return calls


def _fault_from(cause: BaseException) -> RuntimeFault:
    try:
        raise RuntimeFault(f"arm at 127.0.0.2: motion failed: {cause}") from cause
    except RuntimeFault as fault:
        return fault


def test_a_motion_the_trajectory_generator_gave_up_on_is_recovered_and_tried_again(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _moves(monkeypatch, _fault_from(RuntimeError("Motion planner failed with error code -111")))
    ctx, run = _Ctx(), CalibrationRun("wrist", "wrist", "arm")
    assert _visit(ctx, "arm", POSE, None, run) is True  # type: ignore[arg-type]
    assert calls[0] == 2 and ctx.robot.arm().recoveries == 1 and run.skipped == []


def test_a_second_generator_failure_ends_the_calibration_naming_the_pose(monkeypatch: pytest.MonkeyPatch) -> None:
    failure = RuntimeError("Motion planner failed with error code -111")
    _moves(monkeypatch, _fault_from(failure), _fault_from(failure))
    with pytest.raises(RuntimeFault, match=r"^tilted: arm at 127.0.0.2: motion failed: Motion planner failed"):
        _visit(_Ctx(), "arm", POSE, None, CalibrationRun("wrist", "wrist", "arm"))  # type: ignore[arg-type]


def test_a_motion_the_robot_ended_is_not_tried_again(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _moves(monkeypatch, _fault_from(franky.ControlException("motion aborted by reflex! [cartesian_reflex]")))
    ctx = _Ctx()
    with pytest.raises(RuntimeFault, match=r"^tilted: .*reflex"):
        _visit(ctx, "arm", POSE, None, CalibrationRun("wrist", "wrist", "arm"))  # type: ignore[arg-type]
    assert calls[0] == 1 and ctx.robot.arm().recoveries == 0


def test_a_refused_motion_is_skipped_with_the_refusal(monkeypatch: pytest.MonkeyPatch) -> None:
    _moves(monkeypatch, MotionRefused("arm.target.x_m", 0.78, "workspace_m.x [0.3, 0.7]"))
    run = CalibrationRun("wrist", "wrist", "arm")
    assert _visit(_Ctx(), "arm", POSE, None, run) is False  # type: ignore[arg-type]
    assert [s.label for s in run.skipped] == ["tilted"]
    assert "the safety envelope refused it" in run.skipped[0].reason and "workspace_m.x" in run.skipped[0].reason
