"""run_policy on franky-sim: a scripted openpi DROID server on 127.0.0.1 drives the arm through the real
franky client; every step is checked against the safety envelope before franky sees it."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("openpi_client", reason="openpi-client is not installed (scripts/setup.sh installs it)")

from fakes.droid_policies import Constant, GoalSeeking
from fakes.openpi_server import ScriptedPolicyServer

from robots.franka import kinematics
from robots.franka.config import FrankaConfig
from robots.franka.runtime import FrankaRuntime, build_runtime
from robots.franka.toolkit import FrankaToolkit

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

GRASP_BELOW_TOP_M = 0.02
PRE_GRASP_ABOVE_M = 0.10


@pytest.fixture(scope="module")
def server() -> Iterator[ScriptedPolicyServer]:
    with ScriptedPolicyServer(Constant([0.0] * 7)) as scripted:
        yield scripted


@pytest.fixture(scope="module")
def runtime(server: ScriptedPolicyServer) -> Iterator[FrankaRuntime]:
    config = FrankaConfig(vla_endpoint=server.endpoint)
    rt = build_runtime(config, sim=True)
    try:
        yield rt
    finally:
        rt.close()


@pytest.fixture
def toolkit(runtime: FrankaRuntime, server: ScriptedPolicyServer, tmp_path: Path) -> Iterator[FrankaToolkit]:
    kit = FrankaToolkit(robot=runtime, output_dir=tmp_path / "run")
    kit.execute_tool("open_gripper", {})
    home = kit.execute_tool("home", {"speed_factor": 0.3})
    assert home.error is None, home.error
    server.observations.clear()
    yield kit
    kit.close(timeout=30)


def grasp_goals(runtime: FrankaRuntime) -> tuple[np.ndarray, list[np.ndarray]]:
    """The TCP pose that grasps the red cube (ground truth), and joint goals above it and down to it
    every 2 cm (a straight line in joint space between far-apart goals would dip towards the table)."""
    sim = runtime.sim
    cube = next(o for o in sim.scene.objects if o.name == "cube")
    centre = sim.object_in_arm_frame("cube", 0)
    top = centre[2] + cube.size_m / 2
    down = kinematics.rpy_matrix(math.pi, 0.0, 0.0)
    poses = []
    for z in np.linspace(top + PRE_GRASP_ABOVE_M, top - GRASP_BELOW_TOP_M, 7):
        pose = np.eye(4)
        pose[:3, :3], pose[:3, 3] = down, (centre[0], centre[1], z)
        poses.append(pose)
    arm = runtime.arm()
    q0 = np.asarray(arm.state().joints)
    path = kinematics.track_path(q0, poses, arm.envelope.flange_to_tcp, iterations=60)
    return poses[-1], list(path)


def action_result(result) -> dict:
    return result.data["action_result"]


def test_a_goal_seeking_policy_reaches_the_cube_within_a_centimetre_and_grasps_it(toolkit, runtime, server):
    grasp_pose, goals = grasp_goals(runtime)
    policy = GoalSeeking(goals)
    server.script = policy
    result = toolkit.execute_tool(
        "run_policy", {"instruction": "pick up the red cube", "max_steps": 400, "stop_when": ["gripper_closed"]}
    )
    assert result.error is None, result.error
    outcome = action_result(result)
    assert outcome["stopped"] == "gripper_closed", outcome
    assert outcome["grasped"] is True
    tcp = runtime.sim.hand_tcp_in_arm_frame(0)
    assert np.linalg.norm(tcp[:3, 3] - grasp_pose[:3, 3]) < 0.01
    # What the server saw: DROID observations only, the instruction as the prompt; and no chunk ran past
    # its 8th action (the rest of each chunk reverses at full speed: the run would have been refused).
    assert policy.problems == []
    assert set(policy.prompts) == {"pick up the red cube"}
    assert len(server.observations) == outcome["inferences"]
    log = outcome["inference_log"]
    assert [entry["step"] for entry in log] == [8 * i for i in range(len(log))]
    assert all(entry["chunk_shape"] == [10, 8] for entry in log)
    steps = [json.loads(line) for line in (toolkit.output_dir / "steps.jsonl").read_text().splitlines()]
    assert [s["tool"] for s in steps].count("run_policy") == 1
