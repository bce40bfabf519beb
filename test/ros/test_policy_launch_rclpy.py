"""run_policy through `ros2 launch rpent dual_franka.launch.py use_sim:=true vla_endpoint:=ws://...` and the
stock `ros2 action send_goal /toolkit/tools/run_policy`: a vla_client_node per arm holds the connection to a
scripted openpi DROID server on 127.0.0.1, the arm node runs each chunk's steps beside its arm."""

from __future__ import annotations

import json
import math
import os
import shutil
import signal
import subprocess
import threading
import time

import numpy as np
import pytest

pytest.importorskip("rclpy", reason="rclpy not importable: ROS 2 is not sourced")
pytest.importorskip("rpent.action", reason="rpent interfaces not generated: colcon build this package and source it")
pytest.importorskip("openpi_client", reason="openpi-client is not installed (scripts/setup.sh installs it)")
if shutil.which("ros2") is None:
    pytest.skip("the ros2 command is not on PATH", allow_module_level=True)

from fakes.droid_policies import GoalSeeking, droid_chunk
from fakes.openpi_server import ScriptedPolicyServer
from sim_process import free_sim_hosts

from robots.franka import kinematics
from robots.franka.config import HOME_JOINTS_RAD
from robots.franka.sim import SimScene
from rpent.record.steps import read_steps

pytestmark = [pytest.mark.ros, pytest.mark.slow, pytest.mark.timeout(900)]


def left_grasp_goals() -> tuple[np.ndarray, list[np.ndarray]]:
    """Joint goals of the left arm from above the red cube down to grasping it (the dual scene's truth)."""
    scene = SimScene.dual()
    cube = next(o for o in scene.objects if o.name == "cube")
    centre = np.asarray(cube.position) - np.asarray(scene.arm_positions[0])
    top = centre[2] + cube.size_m / 2
    poses = []
    for z in np.linspace(top + 0.10, top - 0.02, 7):
        pose = np.eye(4)
        pose[:3, :3], pose[:3, 3] = kinematics.rpy_matrix(math.pi, 0.0, 0.0), (centre[0], centre[1], z)
        poses.append(pose)
    return poses[-1], list(kinematics.track_path(HOME_JOINTS_RAD, poses, iterations=60))


def send_goal(tool: str, arguments: dict, timeout_s: float = 240) -> subprocess.Popen:
    goal = f"{{arguments_json: '{json.dumps(arguments)}'}}"
    return subprocess.Popen(["ros2", "action", "send_goal", f"/toolkit/tools/{tool}", "rpent/action/CallTool", goal,
                             "--feedback"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})


def result_of(output: str) -> dict:
    """The CallTool result's result_json as the stock CLI prints it."""
    marker = "result_json: '"
    start = output.rindex(marker) + len(marker)
    end = output.index("'\n", start)
    return json.loads(output[start:end].replace("''", "'"))


def wait_for_line(proc: subprocess.Popen, text: str, lines: list[str], timeout_s: float) -> None:
    found = threading.Event()

    def read() -> None:
        for line in proc.stdout:
            lines.append(line)
            if text in line:
                found.set()

    threading.Thread(target=read, daemon=True).start()
    assert found.wait(timeout_s), f"no {text!r} within {timeout_s} s:\n{''.join(lines)}"


def test_run_policy_through_ros2_launch_and_the_stock_send_goal(tmp_path):
    grasp_pose, goals = left_grasp_goals()
    policy = GoalSeeking(goals)
    with ScriptedPolicyServer(policy) as server:
        run_dir = tmp_path / "run"
        launch = subprocess.Popen(
            ["ros2", "launch", "rpent", "dual_franka.launch.py", "use_sim:=true",
             f"sim_hosts:={','.join(free_sim_hosts(131, 139, 2))}", f"vla_endpoint:={server.endpoint}",
             f"output_dir:={run_dir}"],
            env={**os.environ, "ROS_AUTOMATIC_DISCOVERY_RANGE": "LOCALHOST"},
            stdout=open(tmp_path / "launch.log", "wb"), stderr=subprocess.STDOUT, start_new_session=True,  # noqa: SIM115
        )
        try:
            # The cube lies between the arms: the right arm turns away first, or the left hand could not
            # come within the arms' minimum distance of it.
            out, _ = send_goal("move_joints", {"arm": "right", "joints_rad": [-0.45, 0.0, 0.0, -1.57, 0.0, 1.57, 0.785]}
                               ).communicate(timeout=400)
            assert "Goal finished with status: SUCCEEDED" in out, out[-3000:]
            cli = send_goal("run_policy", {"arm": "left", "instruction": "pick up the red cube", "max_steps": 900, "max_duration_s": 400,
                                           "stop_when": ["gripper_closed"]})
            out, _ = cli.communicate(timeout=500)
            assert "Goal finished with status: SUCCEEDED" in out, out[-3000:]
            outcome = result_of(out)["action_result"]
            summary = {k: outcome.get(k) for k in ("stopped", "steps", "inferences", "joints_rad", "error", "control")}
            assert outcome["stopped"] == "gripper_closed" and outcome["grasped"] is True, (
                summary, outcome["inference_log"][-3:], [g.round(3).tolist() for g in goals[-2:]])
            reached = kinematics.tcp_pose(outcome["joints_rad"])
            assert np.linalg.norm(reached[:3, 3] - grasp_pose[:3, 3]) < 0.01
            assert policy.problems == [] and len(server.observations) == outcome["inferences"]
            control = outcome["control"]
            print(f"ros: {outcome['steps']} steps, {outcome['inferences']} inferences, period p50/p99 deviation "
                  f"{control['p50_deviation_ms']}/{control['p99_deviation_ms']} ms")

            # Ctrl-C on the stock CLI mid-run cancels the goal: the arm is stopped, the call recorded as cancelled.
            server.script = lambda obs, i: droid_chunk([0.0, 0.0, 0.0, 0.0, 0.0, 0.1, 0.0])
            cli = send_goal("run_policy", {"arm": "right", "instruction": "nod", "max_steps": 3000})
            lines: list[str] = []
            wait_for_line(cli, "stage: running", lines, 120)
            inferences = len(server.observations)
            deadline = time.monotonic() + 60
            while len(server.observations) < inferences + 2:  # mid-run: a chunk or more has been executed
                assert time.monotonic() < deadline, "the policy was not asked again"
                time.sleep(0.01)
            os.kill(cli.pid, signal.SIGINT)
            cli.wait(60)
            out = "".join(lines)
            assert "Goal canceled." in out or "CANCELED" in out, out[-2000:]
            deadline = time.monotonic() + 60
            while True:
                steps = read_steps(run_dir / "steps.jsonl")
                if steps and steps[-1]["tool"] == "run_policy" and steps[-1]["arguments"].get("arm") == "right":
                    break
                assert time.monotonic() < deadline, "the cancelled call was not recorded"
                time.sleep(0.1)
            assert steps[-1]["error"].startswith("cancelled"), steps[-1]
        finally:
            if launch.poll() is None:
                os.killpg(launch.pid, signal.SIGINT)
                try:
                    launch.wait(timeout=60)
                except subprocess.TimeoutExpired:
                    os.killpg(launch.pid, signal.SIGKILL)
                    launch.wait(10)
