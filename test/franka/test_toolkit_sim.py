"""FrankaToolkit / DualFrankaToolkit driving franky-sim through the real franky client.

Tolerances: Cartesian targets within 2 mm, gripper widths within 5 mm of the cube (4.5 cm).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from sim_process import franka_sim_process

from robots.dual_franka.toolkit import DualFrankaToolkit
from robots.franka.config import ArmConfig, FrankaConfig
from robots.franka.runtime import FrankaRuntime, build_runtime
from robots.franka.safety import SafetyEnvelope
from robots.franka.toolkit import OBSERVATION_FIELDS, RESULT_FIELDS, SIM_IMAGE_ORDER, FrankaToolkit
from rpent.tools.images import decode_png

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

PICK_RECIPE = Path(__file__).resolve().parents[2] / "robots" / "franka" / "recipes" / "pick_cube.jsonl"
POS_TOL_M = 0.002


@pytest.fixture(scope="module")
def toolkit(sim_runtime: FrankaRuntime, tmp_path_factory) -> Iterator[FrankaToolkit]:
    kit = FrankaToolkit(robot=sim_runtime, output_dir=tmp_path_factory.mktemp("franka_run"))
    yield kit
    kit.close(timeout=30)


def _arm_joint_speeds(sim) -> np.ndarray:
    """The simulator's own joint speeds of arm 0 [rad/s], whatever franky reports."""
    import mujoco

    ids = [mujoco.mj_name2id(sim.model, mujoco.mjtObj.mjOBJ_JOINT, f"robot0_fr3_joint{i}") for i in range(1, 8)]
    with sim.lock:
        return np.array([sim.data.qvel[sim.model.jnt_dofadr[i]] for i in ids])


def _ok(result):
    assert result.error is None, result.error
    return result.data


def test_get_state_reports_pose_joints_and_gripper(toolkit: FrankaToolkit) -> None:
    data = _ok(toolkit.execute_tool("get_state", {}))
    arm = data["arms"]["arm"]
    assert set(arm) == {"ee_pose", "joints_rad", "joint_velocities_rad_s", "moving", "has_errors", "gripper"}
    assert len(arm["joints_rad"]) == 7
    assert set(arm["gripper"]) == {"width_m", "max_width_m", "grasped"}


def test_capture_images_returns_one_png_per_camera_in_order(toolkit: FrankaToolkit) -> None:
    result = toolkit.execute_tool("capture_images", {})
    step = int(Path(result.image_paths[0]).name.split("_", 1)[0])  # the call id the images are saved under
    assert _ok(result) == {"cameras": [
        {"name": name, "width": 320, "height": 240, "depth": True, "back_project": True, "step": step}
        for name in ("front", "top", "wrist")
    ]}  # fmt: skip
    assert [decode_png(png).shape for png in result.images] == [(240, 320, 3)] * 3
    assert [Path(p).name.split("_", 1)[1] for p in result.image_paths] == [f"capture_images_{c}.png" for c in ("front", "top", "wrist")]
    assert all(Path(p).is_file() for p in result.image_paths)


def test_every_tool_returns_its_declared_fields(toolkit: FrankaToolkit, request) -> None:
    calls = [
        ("home", {}), ("open_gripper", {}), ("move_gripper", {"width_m": 0.06}), ("grasp", {"width_m": 0.0}),
        ("open_gripper", {}), ("move_joints", {"joints_rad": [0.05, 0, 0, -1.57, 0, 1.57, 0.785]}),
        ("move_to", {"x_m": 0.5, "y_m": 0.0, "z_m": 0.4}), ("move_by", {"dz_m": 0.02}), ("recover", {}),
        ("home", {}), ("get_state", {}), ("capture_images", {}), ("stop", {"reason": "the last call"}),
    ]
    request.addfinalizer(lambda: toolkit.release_stop("the test"))  # the module's toolkit moves again
    for name, args in calls:
        result = toolkit.execute_tool(name, args)
        data = _ok(result)
        if toolkit.get_tool(name).readonly:
            assert sorted(data) == RESULT_FIELDS[name], name
        else:
            assert sorted(data) == OBSERVATION_FIELDS, name
            assert sorted(data["action_result"]) == RESULT_FIELDS[name], name
            assert [c["name"] for c in data["cameras"]] == SIM_IMAGE_ORDER, name
            assert len(result.images) == len(SIM_IMAGE_ORDER), name


def test_move_by_reaches_target_and_observation_follows(toolkit: FrankaToolkit, sim_runtime) -> None:
    start = sim_runtime.arm().state().pose
    result = toolkit.execute_tool("move_by", {"dz_m": -0.04, "dy_m": 0.02})
    data = _ok(result)
    assert data["action"] == "move_by"
    assert data["action_result"]["reached"] is True
    assert data["action_result"]["position_error_m"] < POS_TOL_M
    expected = np.add(start.position, (0.0, 0.02, -0.04))
    assert data["arms"]["arm"]["ee_pose"]["position"] == pytest.approx(expected, abs=POS_TOL_M)
    assert [c["name"] for c in data["cameras"]] == ["front", "top", "wrist"] and len(result.images) == 3


def test_move_to_with_orientation(toolkit: FrankaToolkit, sim_runtime) -> None:
    args = {"x_m": 0.5, "y_m": -0.05, "z_m": 0.35, "roll_rad": 3.14159, "pitch_rad": 0.0, "yaw_rad": 0.3}
    data = _ok(toolkit.execute_tool("move_to", args))
    pose = sim_runtime.arm().state().pose
    assert pose.position == pytest.approx((0.5, -0.05, 0.35), abs=POS_TOL_M)
    assert pose.rpy[2] == pytest.approx(0.3, abs=0.01)
    assert data["action_result"]["target"]["position"] == [0.5, -0.05, 0.35]


def test_out_of_envelope_move_is_refused_naming_limit_and_arm_stays(toolkit: FrankaToolkit, sim_runtime) -> None:
    before = sim_runtime.arm().state()
    # Past a range the schema states (the envelope's own limits): refused as arguments, naming the bound.
    result = toolkit.execute_tool("move_to", {"x_m": 0.5, "y_m": 0.0, "z_m": 0.1})
    assert result.is_error
    assert "z_m: Input should be greater than or equal to 0.21 (got 0.1)" in result.error
    result = toolkit.execute_tool("move_by", {"dx_m": 0.15})
    assert "dx_m: Input should be less than or equal to 0.1 (got 0.15)" in result.error
    result = toolkit.execute_tool("grasp", {"force_n": 90})
    assert "force_n: Input should be less than or equal to 40" in result.error
    # Inside every range yet outside the envelope (the step as a whole, the reach): the envelope refuses.
    result = toolkit.execute_tool("move_by", {"dx_m": 0.08, "dy_m": -0.08})
    assert "arm.step.length_m = 0.1131 violates max_step_m 0.1" in result.error
    result = toolkit.execute_tool("move_to", {"x_m": 0.7, "y_m": 0.3, "z_m": 0.65})
    assert "max_reach_m" in result.error
    after = sim_runtime.arm().state()
    assert not after.moving and after.pose.distance_to(before.pose) < 0.0005


def test_schema_rejects_nonsense_before_anything_moves(toolkit: FrankaToolkit) -> None:
    result = toolkit.execute_tool("move_joints", {"joints_rad": [0, 0, 0]})
    assert result.is_error and "joints_rad" in result.error
    result = toolkit.execute_tool("move_to", {"x_m": 0.5, "y_m": 0, "z_m": 0.3, "yaw_rad": 0.1, "quaternion_xyzw": [0, 0, 0, 1]})
    assert "not both" in result.error


def test_cancel_stops_a_long_move_and_returns(toolkit: FrankaToolkit, sim_runtime, let_sim_run) -> None:
    arm = sim_runtime.arm()
    start = arm.settled_state().pose  # at rest, so "moving" below is this call's motion
    call = toolkit.submit("move_by", {"dy_m": 0.1, "speed_factor": 0.05})
    deadline = time.monotonic() + 30
    while not arm.state().moving:
        assert time.monotonic() < deadline and not call.done(), "the move never started"
        time.sleep(0.005)
    cancelled_at = time.perf_counter()
    assert call.cancel()
    result = call.result(timeout=10)
    assert result.is_error and result.error.startswith("cancelled")
    assert arm.last_stop_sent_s is not None and arm.last_stop_sent_s >= cancelled_at
    # Observed like any call, once the stop has settled (bounded): pictures, and a state that says
    # "not moving" only when the simulated joints really are at rest.
    assert time.perf_counter() - cancelled_at < 1.0 + 5.0
    assert len(result.images) == len(SIM_IMAGE_ORDER)
    truth = np.abs(_arm_joint_speeds(sim_runtime.sim))
    observed = result.data["arms"]["arm"]
    if observed["moving"] is False:
        assert max(abs(v) for v in observed["joint_velocities_rad_s"]) < 0.1 and truth.max() < 0.1, (observed, truth)
    assert observed["moving"] is False, observed  # 1 s is ample for a stop at 5 % speed
    let_sim_run(sim_runtime, 0.8)
    assert not arm.state().moving
    assert arm.state().pose.distance_to(start) < 0.09  # stopped well short of the 10 cm target
    _ok(toolkit.execute_tool("home", {}))


class _ScriptedOperator:
    """Answers approval requests from a list, recording what was asked."""

    def __init__(self, answers: list[bool]) -> None:
        self.answers = answers
        self.asked: list[str] = []

    def request(self, request_id: str, description: str, timeout_s: float) -> bool:
        self.asked.append(description)
        return self.answers.pop(0)


def test_approval_mode_waits_for_the_operator(toolkit: FrankaToolkit, sim_runtime) -> None:
    arm = sim_runtime.arm()
    original = arm.envelope
    arm.envelope = SafetyEnvelope(original.limits.model_copy(update={"require_approval": True}), arm.name)
    sim_runtime.approval = operator = _ScriptedOperator([False, True])
    try:
        before = arm.state().pose
        denied = toolkit.execute_tool("move_by", {"dz_m": -0.02})
        assert "operator denied the motion" in denied.error
        assert arm.state().pose.distance_to(before) < 0.0005
        _ok(toolkit.execute_tool("move_by", {"dz_m": -0.02}))
        assert arm.state().pose.distance_to(before) == pytest.approx(0.02, abs=POS_TOL_M)
        assert len(operator.asked) == 2 and "move arm by [0.0, 0.0, -0.02]" in operator.asked[0]
    finally:
        arm.envelope = original
        sim_runtime.approval = None


def _run_recipe(kit: FrankaToolkit, lines: list[dict]) -> None:
    for line in lines:
        _ok(kit.execute_tool(line["tool"], line["arguments"]))


@pytest.mark.timeout(400)
def test_pick_recipe_solves_and_its_replay_gives_the_same_result(tmp_path: Path) -> None:
    bundled = [json.loads(line) for line in PICK_RECIPE.read_text().splitlines() if line.strip()]
    finals = []
    recipe = bundled
    for run in range(2):
        runtime = build_runtime(FrankaConfig(), sim=True)
        kit = FrankaToolkit(robot=runtime, output_dir=tmp_path / f"run{run}")
        try:
            assert kit.solved() is False
            _run_recipe(kit, recipe)
            assert kit.solved() is True
            if run == 0:
                assert kit.finish_result is not None and kit.finish_result["status"] == "success"
            assert runtime.gripper().state().grasped
            finals.append(runtime.sim.body_position("cube"))
            recipe = [json.loads(line) for line in kit.write_recipe("pick").read_text().splitlines()]
        finally:
            kit.close(timeout=30)
            runtime.close()
    # A written recipe holds the robot calls; `finish` is the planner's verdict, not part of it.
    assert [line["tool"] for line in recipe] == [line["tool"] for line in bundled if line["tool"] != "finish"]
    assert finals[1] == pytest.approx(finals[0], abs=0.01)


@pytest.mark.timeout(300)
def test_dual_arm_tools_move_the_named_arm_and_both_at_once(tmp_path: Path) -> None:
    config = FrankaConfig(arms=[ArmConfig(name="left"), ArmConfig(name="right")])
    runtime = build_runtime(config, sim=True, sim_cameras=False)
    kit = DualFrankaToolkit(robot=runtime, output_dir=tmp_path)
    try:
        left, right = runtime.arm("left"), runtime.arm("right")
        l0, r0 = left.state().pose, right.state().pose
        data = _ok(kit.execute_tool("move_by", {"arm": "L", "dz_m": -0.03}))
        assert data["action_result"]["arm"] == "left"
        assert left.state().pose.position[2] == pytest.approx(l0.position[2] - 0.03, abs=POS_TOL_M)
        assert right.state().pose.distance_to(r0) < 0.0005
        data = _ok(kit.execute_tool("move_both_by", {"dz_m": 0.03}))
        assert [a["arm"] for a in data["action_result"]["arms"]] == ["left", "right"]
        assert left.state().pose.distance_to(l0) < POS_TOL_M
        assert right.state().pose.position[2] == pytest.approx(r0.position[2] + 0.03, abs=POS_TOL_M)
        refused = kit.execute_tool("move_both_by", {"dz_m": -0.15})
        assert "dz_m: Input should be greater than or equal to -0.1" in refused.error  # max_step_m, in the schema
        assert set(_ok(kit.execute_tool("get_state", {}))["arms"]) == {"left", "right"}
        assert "arm: Input should be 'left' or 'right'" in kit.execute_tool("open_gripper", {"arm": "middle"}).error
        _ok(kit.execute_tool("grasp", {"arm": "Right", "width_m": 0.0}))
        assert runtime.gripper("right").state().width_m < 0.01
        assert runtime.gripper("left").state().width_m > 0.03
    finally:
        kit.close(timeout=30)
        runtime.close()


@pytest.mark.timeout(120)
def test_simulator_killed_mid_motion_gives_a_tool_error_not_a_hang(tmp_path: Path) -> None:
    with franka_sim_process("127.0.0.211", "127.0.0.212") as (proc, host):
        runtime = build_runtime(FrankaConfig(arms=[ArmConfig(host=host, connect_timeout_s=10)], safety_file=None))
        kit = FrankaToolkit(robot=runtime, output_dir=tmp_path)
        try:
            call = kit.submit("move_by", {"dz_m": -0.08, "speed_factor": 0.05})
            while not runtime.arm().state().moving:
                assert not call.done(), call.result().error
                time.sleep(0.005)
            proc.kill()
            result = call.result(timeout=30)
            assert result.is_error
            assert f"lost connection to the robot at {host}" in result.error
            assert kit.solved() is None  # no simulator in this process: no ground truth
        finally:
            kit.close(timeout=10)
            runtime.close()
