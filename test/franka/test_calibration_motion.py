"""How a calibration treats a motion that did not go through: refused (skipped), failed (stop the
calibration, naming the pose). A trajectory-generator failure is planned again (up to twice) by the motion
itself, as for every tool (test_motion_replan_sim.py), so the calibration sees only what is left."""

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


class _Ctx:
    robot = None


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


def test_a_second_generator_failure_ends_the_calibration_naming_the_pose(monkeypatch: pytest.MonkeyPatch) -> None:
    # What reaches the calibration after the motion's own plans failed too.
    calls = _moves(monkeypatch, _fault_from(RuntimeError("Motion planner failed with error code -111")))
    with pytest.raises(RuntimeFault, match=r"^tilted: arm at 127.0.0.2: motion failed: Motion planner failed"):
        _visit(_Ctx(), "arm", POSE, None, CalibrationRun("wrist", "wrist", "arm"))  # type: ignore[arg-type]
    assert calls[0] == 1


def test_a_motion_the_robot_ended_is_not_tried_again(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _moves(monkeypatch, _fault_from(franky.ControlException("motion aborted by reflex! [cartesian_reflex]")))
    with pytest.raises(RuntimeFault, match=r"^tilted: .*reflex"):
        _visit(_Ctx(), "arm", POSE, None, CalibrationRun("wrist", "wrist", "arm"))  # type: ignore[arg-type]
    assert calls[0] == 1


def test_a_refused_motion_is_skipped_with_the_refusal(monkeypatch: pytest.MonkeyPatch) -> None:
    _moves(monkeypatch, MotionRefused("arm.target.x_m", 0.78, "workspace_m.x [0.3, 0.7]"))
    run = CalibrationRun("wrist", "wrist", "arm")
    assert _visit(_Ctx(), "arm", POSE, None, run) is False  # type: ignore[arg-type]
    assert [s.label for s in run.skipped] == ["tilted"]
    assert "the safety envelope refused it" in run.skipped[0].reason and "workspace_m.x" in run.skipped[0].reason
