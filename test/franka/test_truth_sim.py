"""Tool results say what really happened, checked against the simulator's ground truth (MuJoCo's own
pose of the hand and the cube), and every must-refuse command leaves the simulated arm where it was."""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from battery import must_accept, must_refuse
from sim_process import franka_sim_process
from sim_toolkit import commanded, own_sim
from zone_battery import box_around, zones_on

from robots.dual_franka.toolkit import DualFrankaToolkit
from robots.franka import kinematics
from robots.franka.config import ArmConfig, FrankaConfig
from robots.franka.runtime import FrankaRuntime, build_runtime
from robots.franka.safety import SafetyEnvelope
from robots.franka.safety_limits import ArmLimits
from robots.franka.sim.simulator import SimScene
from robots.franka.toolkit import FrankaToolkit
from rpent.runtime.arm import RuntimeFault
from rpent.runtime.types import Pose

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

STILL_RAD = 1e-4


@pytest.fixture(scope="module")
def toolkit(sim_runtime: FrankaRuntime, tmp_path_factory) -> Iterator[FrankaToolkit]:
    kit = FrankaToolkit(robot=sim_runtime, output_dir=tmp_path_factory.mktemp("truth"))
    yield kit
    kit.close(timeout=30)


def _ok(result: Any) -> dict[str, Any]:
    """The tool's own result (robot actions come back with the observation around them)."""
    assert result.error is None, result.error
    return result.data.get("action_result", result.data)


def _truth(runtime: FrankaRuntime, arm_index: int = 0) -> np.ndarray:
    assert runtime.sim is not None
    return runtime.sim.hand_tcp_in_arm_frame(arm_index)


def _at_rest(runtime: FrankaRuntime) -> tuple[float, ...]:
    """Joints once the simulated arm has stopped creeping towards its last command (< 5e-5 rad/s):
    its PD hold keeps converging for seconds, which no command of the battery causes."""
    arm = runtime.arm()
    deadline = time.monotonic() + 20
    state = arm.settled_state()
    while max(abs(v) for v in state.joint_velocities[:6]) > 5e-5 and time.monotonic() < deadline:
        time.sleep(0.01)  # polling a condition with a deadline, not waiting out a race
        state = arm.state()
    return state.joints


def test_reached_is_true_only_where_the_hand_really_is(toolkit: FrankaToolkit, sim_runtime: FrankaRuntime) -> None:
    _ok(toolkit.execute_tool("home", {}))
    table = []
    # Free space: the hand gets there.
    free = _ok(toolkit.execute_tool("move_to", {"x_m": 0.5, "y_m": 0.1, "z_m": 0.35}))
    truth = _truth(sim_runtime)
    table.append(("free space", free["reached"], float(np.linalg.norm(truth[:3, 3] - (0.5, 0.1, 0.35)))))
    assert free["reached"] is True and free["cause"] is None
    assert free["position_error_m"] <= 0.005
    assert np.allclose(free["pose"]["position"], truth[:3, 3], atol=0.002)  # reported = measured, not commanded

    # The table in the way: a lab's lax envelope (workspace floor 5 cm under the table top, no table
    # check) lets the arm try, and the table stops the fingers short of the target.
    arm = sim_runtime.arm()
    strict = arm.envelope
    lax = ArmLimits(workspace_m={"x": (0.3, 0.7), "y": (-0.3, 0.3), "z": (0.15, 0.65)}, table={"top_z_m": 0.0})
    arm.envelope = SafetyEnvelope(lax, "arm", flange_to_tcp=strict.flange_to_tcp)
    # A toolkit built on the lax envelope: its schema's ranges are the envelope's (z down to 0.15).
    lax_kit = FrankaToolkit(robot=sim_runtime)
    try:
        _ok(lax_kit.execute_tool("move_to", {"x_m": 0.62, "y_m": 0.08, "z_m": 0.26}))
        blocked = _ok(lax_kit.execute_tool("move_to", {"x_m": 0.62, "y_m": 0.08, "z_m": 0.17}))
        truth = _truth(sim_runtime)
        table.append(("into the table", blocked["reached"], float(np.linalg.norm(truth[:3, 3] - (0.62, 0.08, 0.17)))))
        assert truth[2, 3] > 0.19  # ground truth: the fingertips rest on the table top (0.20 m)
        assert blocked["reached"] is False
        assert blocked["cause"].startswith("contact")
        assert blocked["position_error_m"] > 0.015
        assert blocked["pose"]["position"][2] == pytest.approx(truth[2, 3], abs=0.003)
        _ok(lax_kit.execute_tool("move_to", {"x_m": 0.62, "y_m": 0.08, "z_m": 0.30}))
    finally:
        lax_kit.close(timeout=30)
        arm.envelope = strict

    # Joint motion: reached is about the measured joints and pose too.
    joints = _ok(toolkit.execute_tool("move_joints", {"joints_rad": [0.2, 0.1, 0.0, -1.9, 0.0, 2.0, 0.785]}))
    truth = _truth(sim_runtime)
    target = kinematics.tcp_pose([0.2, 0.1, 0.0, -1.9, 0.0, 2.0, 0.785])
    table.append(("joint target", joints["reached"], float(np.linalg.norm(truth[:3, 3] - target[:3, 3]))))
    assert joints["reached"] is True and joints["joint_error_rad"] < 0.01
    print("reached truth table (case, reported, true distance to target m):", table)
    for _, reported, distance in table:
        assert reported == (distance <= 0.005)


def test_grasped_is_true_only_with_something_between_the_fingers(toolkit: FrankaToolkit, sim_runtime) -> None:
    sim = sim_runtime.sim
    assert sim is not None
    _ok(toolkit.execute_tool("home", {}))
    _ok(toolkit.execute_tool("open_gripper", {}))
    air = _ok(toolkit.execute_tool("grasp", {"width_m": 0.0, "force_n": 20.0}))
    state = _ok(toolkit.execute_tool("get_state", {}))["arms"]["arm"]["gripper"]
    table = [("empty air", air["grasped"], air["width_m"])]
    assert air["grasped"] is False and state["grasped"] is False
    assert air["width_m"] < 0.005  # ground truth: the fingers closed all the way

    _ok(toolkit.execute_tool("open_gripper", {}))
    cube = sim.object_in_arm_frame("cube")
    _ok(toolkit.execute_tool("move_to", {"x_m": float(cube[0]), "y_m": float(cube[1]), "z_m": float(cube[2]) + 0.10}))
    _ok(toolkit.execute_tool("move_to", {"x_m": float(cube[0]), "y_m": float(cube[1]), "z_m": float(cube[2]) + 0.005}))
    held = _ok(toolkit.execute_tool("grasp", {"width_m": 0.0, "force_n": 20.0}))
    _ok(toolkit.execute_tool("move_by", {"dz_m": 0.08}))
    lifted = sim.object_in_arm_frame("cube")[2] > cube[2] + 0.05  # ground truth: the cube came along
    state = _ok(toolkit.execute_tool("get_state", {}))["arms"]["arm"]["gripper"]
    table.append(("the cube", held["grasped"], held["width_m"]))
    assert held["grasped"] is True and state["grasped"] is True and lifted

    # Shutdown (what a node's shutdown or the stop tool does to the hand): a held object stays held.
    width = state["width_m"]
    sim_runtime.stop_all()
    t_end = sim.time_s + 0.5
    while sim.time_s < t_end:
        time.sleep(0.01)
    after = sim_runtime.gripper().state()
    assert after.grasped and after.width_m == pytest.approx(width, abs=1e-4)
    assert sim.object_in_arm_frame("cube")[2] > cube[2] + 0.05

    released = _ok(toolkit.execute_tool("open_gripper", {}))
    table.append(("released", released["grasped"], released["width_m"]))
    assert released["grasped"] is False
    print("grasped truth table (case, reported, width m):", table)
    _ok(toolkit.execute_tool("move_by", {"dz_m": -0.07}))
    _ok(toolkit.execute_tool("home", {}))


class _StopFails:
    """franky's Robot with a stop that raises, as a real FCI connection can."""

    def __init__(self, robot: Any) -> None:
        self._robot = robot

    def stop(self) -> None:
        raise RuntimeError("libfranka: command rejected")

    def __getattr__(self, name: str) -> Any:
        return getattr(self._robot, name)


def test_stop_reports_a_stop_that_failed(toolkit: FrankaToolkit, sim_runtime: FrankaRuntime, request) -> None:
    request.addfinalizer(lambda: toolkit.release_stop("the test"))  # the module's toolkit moves again
    arm = sim_runtime.arm()
    real = arm._robot
    arm._robot = _StopFails(real)
    try:
        result = toolkit.execute_tool("stop", {})
    finally:
        arm._robot = real
    assert result.is_error and "stop failed" in result.error and "command rejected" in result.error
    assert result.error.startswith("the stop is latched, but ")  # it holds all the same
    assert toolkit.execute_tool("move_by", {"dz_m": 0.01}).error == toolkit.stop_latch.line()
    assert _ok(toolkit.execute_tool("stop", {}))["halted"] == ["arm"]


@pytest.fixture
def fresh(tmp_path: Path) -> Iterator[tuple[FrankaToolkit, FrankaRuntime]]:
    """A simulator of its own: what earlier tests did to the shared one (contacts, pushes) leaves the
    simulated arm creeping for a long while, which would be mistaken for a refused command's doing."""
    with own_sim(FrankaConfig(), FrankaToolkit, tmp_path) as pair:
        yield pair


def test_battery_must_refuse_leaves_the_arm_still(fresh) -> None:
    toolkit, sim_runtime = fresh
    from_home, _ = must_refuse()
    single = [c for c in from_home if c.robot == "franka"]
    _at_rest(sim_runtime)
    moved = 0.0
    for command in single:
        # Per command: the simulated arm's own slow creep while it holds a pose is not a command's doing.
        before, sent = np.asarray(sim_runtime.arm().state().joints), commanded(sim_runtime)
        result = toolkit.execute_tool(command.tool, command.arguments)
        after = np.asarray(sim_runtime.arm().state().joints)
        assert np.array_equal(commanded(sim_runtime), sent), f"a command reached the robot: {command}"
        assert result.is_error, f"accepted a must-refuse command: {command}"
        assert "refused" in result.error or "invalid arguments" in result.error, result.error
        moved = max(moved, float(np.max(np.abs(after - before))))
    print(f"must-refuse on the sim arm: {len(single)} refused, largest joint displacement {moved:.2e} rad")
    assert moved < STILL_RAD


def test_battery_safe_commands_pass_the_live_arm_checks_and_some_run(toolkit, sim_runtime) -> None:
    _ok(toolkit.execute_tool("home", {}))
    arm = sim_runtime.arm()
    current = arm.settled_state().pose
    commands = must_accept()
    for command in commands:
        args = command.arguments
        if command.tool == "move_joints":
            arm.check_joints([args["joints_rad"]])
        else:
            roll, pitch, yaw = current.rpy
            arm.check_cartesian([Pose.from_rpy([args["x_m"], args["y_m"], args["z_m"]], [roll, pitch, args["yaw_rad"]])])
    # One Cartesian move and one joint move of them run (each checked above; each run costs seconds).
    for command in (next(c for c in commands if c.tool == "move_to"), next(c for c in commands if c.tool == "move_joints")):
        data = _ok(toolkit.execute_tool(command.tool, command.arguments))
        assert data["reached"] is True, data
        _ok(toolkit.execute_tool("home", {}))


@pytest.fixture(scope="module")
def dual(tmp_path_factory) -> Iterator[tuple[DualFrankaToolkit, FrankaRuntime]]:
    config = FrankaConfig(arms=[ArmConfig(name="left"), ArmConfig(name="right")])
    with own_sim(config, DualFrankaToolkit, tmp_path_factory.mktemp("dual"), SimScene.dual()) as pair:
        yield pair  # type: ignore[misc]


def test_dual_arms_crossing_are_refused_and_neither_arm_moves(dual) -> None:
    kit, runtime = dual
    from_home, _ = must_refuse()
    crossing = [c for c in from_home if c.robot == "dual_franka"]
    for arm in runtime.arms.values():
        arm.settled_state()
    for command in crossing:
        before = {n: np.asarray(a.state().joints) for n, a in runtime.arms.items()}
        result = kit.execute_tool(command.tool, command.arguments)
        assert result.is_error and "arm_distance_m" in result.error, (command, result.error)
        for name, arm in runtime.arms.items():
            assert float(np.max(np.abs(np.asarray(arm.state().joints) - before[name]))) < STILL_RAD
    # Apart, both move.
    data = _ok(kit.execute_tool("move_both_by", {"dz_m": -0.05}))
    assert all(a["reached"] for a in data["arms"])


def test_a_dual_move_into_one_arm_s_keep_out_zone_is_refused_and_neither_arm_moves(dual) -> None:
    kit, runtime = dual
    left = runtime.arm("left")
    # A tray 8 cm under the left hand (world frame), the left arm's zone only.
    tray = box_around("left_tray", np.asarray(left.settled_state().pose.position) + left.envelope.base_xyz_m - np.array([0, 0, 0.08]))
    with zones_on(left, [tray]):
        commanded = {n: np.asarray(a._robot.state.q_d) for n, a in runtime.arms.items()}
        result = kit.execute_tool("move_both_by", {"dz_m": -0.08})
        assert result.is_error and "refused: left." in result.error and "keep-out zone 'left_tray'" in result.error, result.error
        for name, arm in runtime.arms.items():  # nothing was sent to either arm
            assert np.array_equal(np.asarray(arm._robot.state.q_d), commanded[name]), name
        # The right arm's own move down as far runs: the tray is not its zone.
        assert _ok(kit.execute_tool("move_by", {"arm": "right", "dz_m": -0.08}))["reached"] is True
    _ok(kit.execute_tool("move_by", {"arm": "right", "dz_m": 0.08}))


@pytest.mark.timeout(120)
def test_lost_connection_is_reported_at_once_for_arm_and_gripper(tmp_path: Path) -> None:
    latencies = {}
    for tool, args, host in (
        ("move_by", {"dz_m": -0.08, "speed_factor": 0.05}, "127.0.0.221"),
        ("grasp", {"width_m": 0.0, "force_n": 20.0}, "127.0.0.222"),
    ):
        with franka_sim_process(host) as (proc, sim_host):
            runtime = build_runtime(FrankaConfig(arms=[ArmConfig(host=sim_host, connect_timeout_s=10)], safety_file=None))
            kit = FrankaToolkit(robot=runtime, output_dir=tmp_path / tool)
            try:
                if tool == "grasp":
                    assert runtime.gripper().open(timeout_s=20).finished
                call = kit.submit(tool, args)
                deadline = time.monotonic() + 30
                while not (runtime.arm().state().moving if tool == "move_by" else runtime.gripper().busy):
                    assert time.monotonic() < deadline and not call.done(), "the command never started"
                    time.sleep(0.005)
                proc.kill()
                killed = time.monotonic()
                result = call.result(timeout=30)
                latencies[tool] = time.monotonic() - killed
                assert result.is_error
                assert f"lost connection to the robot at {sim_host}" in result.error, result.error
                assert "timed out" not in result.error
                with pytest.raises(RuntimeFault, match="lost connection"):
                    runtime.arm().state()  # and nothing waits on the dead robot any more
            finally:
                kit.close(timeout=10)
                runtime.close()
    print("error after the simulator died [s]:", {k: round(v, 3) for k, v in latencies.items()})
    assert all(math.isfinite(v) for v in latencies.values())
