"""Keep-out zones on the simulated arm: the zone battery's refusals through the tools leave the arm
still (nothing reaches franky), a path beside a zone runs, and the safety file's zones are the ones
the arm holds to. Geometry alone: test_keep_out.py; a policy's steps: test_policy_sim.py."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from sim_toolkit import commanded, own_sim
from zone_battery import HOME, ZoneCase, cases, zones_on

from robots.franka.config import FrankaConfig
from robots.franka.runtime import FrankaRuntime
from robots.franka.safety import SafetyEnvelope
from robots.franka.safety_limits import ArmLimits
from robots.franka.toolkit import FrankaToolkit
from rpent.runtime.arm import MotionRefused

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

# Nothing was sent (franky's commanded joints unchanged) is the exact check; the measured joints may
# still creep from the PD hold after the previous motion (test_truth_sim waits that out), well under this.
STILL_RAD = 1e-3


@pytest.fixture(scope="module")
def cell(tmp_path_factory) -> Iterator[tuple[FrankaToolkit, FrankaRuntime]]:
    folder = tmp_path_factory.mktemp("keep_out")
    safety = folder / "safety.yaml"
    safety.write_text("keep_out:\n  - {name: monitor, box: {x_m: [0.45, 0.60], y_m: [0.15, 0.30], z_m: [0.2, 0.5]}}\n")
    with own_sim(FrankaConfig(safety_file=str(safety)), FrankaToolkit, folder / "run") as pair:
        yield pair


def _ok(result: Any) -> dict[str, Any]:
    assert result.error is None, result.error
    return result.data.get("action_result", result.data)


def _reachable_from_home(joints: tuple[float, ...]) -> bool:
    try:
        SafetyEnvelope(ArmLimits(), "arm").check_joint_motion(HOME, [joints])
    except MotionRefused:
        return False
    return True


def _pick(kind: str, tool: str, count: int) -> list[ZoneCase]:
    return [c for c in cases() if c.kind == kind and c.tool == tool][:count]


def test_the_safety_file_s_zone_refuses_a_move_into_it_naming_zone_link_and_waypoint(cell) -> None:
    kit, runtime = cell
    _ok(kit.execute_tool("home", {}))
    sent = commanded(runtime)
    result = kit.execute_tool("move_to", {"x_m": 0.5, "y_m": 0.22, "z_m": 0.35})
    assert result.is_error
    assert "keep_out_m" in result.error and "keep-out zone 'monitor'" in result.error, result.error
    assert np.array_equal(commanded(runtime), sent)


def test_zone_battery_refusals_leave_the_arm_still_and_a_path_beside_runs(cell) -> None:
    kit, runtime = cell
    arm = runtime.arm()
    _ok(kit.execute_tool("home", {}))
    refused = 0
    for case in [c for kind in ("in_target", "across_path") for tool in ("move_to", "move_joints")
                 for c in _pick(kind, tool, 2)]:
        with zones_on(arm, [case.zone]):
            before, sent = np.asarray(arm.settled_state().joints), commanded(runtime)
            result = kit.execute_tool(case.tool, case.arguments)
            assert result.is_error and f"keep-out zone {case.zone.name!r}" in result.error, (case, result.error)
            assert np.array_equal(commanded(runtime), sent), f"a command reached the robot: {case}"
            assert np.max(np.abs(np.asarray(arm.state().joints) - before)) < STILL_RAD
            refused += 1
    # home, from where the battery starts it, with a zone across the way back: refused where it stands.
    case = next(c for c in _pick("across_path", "home", 12) if _reachable_from_home(c.start))
    _ok(kit.execute_tool("move_joints", {"joints_rad": list(case.start)}))
    with zones_on(arm, [case.zone]):
        sent = commanded(runtime)
        result = kit.execute_tool("home", {})
        assert result.is_error and "keep-out zone 'on_the_way'" in result.error, result.error
        assert np.array_equal(commanded(runtime), sent)
    # Beside a zone (every kind is accepted by the geometry: test_keep_out.py), the arm runs it.
    _ok(kit.execute_tool("home", {}))
    case = _pick("beside_path", "move_to", 1)[0]
    with zones_on(arm, [case.zone]):
        assert _ok(kit.execute_tool(case.tool, case.arguments))["reached"] is True, case
    _ok(kit.execute_tool("home", {}))
    assert np.max(np.abs(np.asarray(arm.settled_state().joints) - HOME)) < 0.01
    print(f"on the sim arm: {refused + 1} refused with the arm still, one beside a zone ran")
