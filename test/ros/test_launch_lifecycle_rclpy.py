"""The launch files and the managed runtime nodes: `runtime_state:=inactive` leaves the arm nodes
configured for a lab's own lifecycle manager (motions refused, saying why, until it activates
them); a node that dies ends the launch and the others stop cleanly; a recipe named as in the
checkout is found in the installed package from any folder.

Runs `ros2 launch` in a subprocess from a folder outside the checkout, franky-sim on the test's own
127.0.0.x addresses. Skipped where rclpy, the generated interfaces, franky-sim or `ros2` are missing.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest

rclpy = pytest.importorskip("rclpy", reason="rclpy not importable: ROS 2 is not sourced")
pytest.importorskip("rpent.action", reason="rpent interfaces not generated: colcon build this package and source it")
pytest.importorskip("franky_sim", reason="franky-sim is not installed (pip install rpent[sim])")
if shutil.which("ros2") is None:
    pytest.skip("the ros2 command is not on PATH", allow_module_level=True)

from lifecycle_msgs.msg import Transition  # noqa: E402
from lifecycle_msgs.srv import ChangeState, GetState  # noqa: E402
from rclpy.node import Node  # noqa: E402
from rclpy.parameter import Parameter  # noqa: E402
from sim_process import free_sim_hosts  # noqa: E402

from rpent_ros.operator.planner_node import PlannerNode  # noqa: E402
from rpent_ros.toolkit.client import RosToolkit  # noqa: E402
from rpent_ros.toolkit.toolkit_node import ToolkitNode  # noqa: E402

pytestmark = [pytest.mark.ros, pytest.mark.slow, pytest.mark.timeout(300)]


class Launch:
    """`ros2 launch rpent <file> <args>` in its own session, started from `cwd`, its output in launch.log."""

    def __init__(self, cwd: Path, *args: str) -> None:
        self.log = cwd / "launch.log"
        self.proc = subprocess.Popen(
            ["ros2", "launch", "rpent", *args], cwd=cwd, stdout=open(self.log, "wb"),  # noqa: SIM115
            stderr=subprocess.STDOUT, start_new_session=True,
            env={**os.environ, "ROS_AUTOMATIC_DISCOVERY_RANGE": "LOCALHOST"},
        )

    @property
    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def wait_for(self, text: str, timeout_s: float) -> None:
        deadline, pause = time.monotonic() + timeout_s, threading.Event()
        while text not in self.text:
            assert self.proc.poll() is None, f"the launch ended before {text!r}:\n{self.text[-4000:]}"
            assert time.monotonic() < deadline, f"no {text!r} within {timeout_s} s:\n{self.text[-4000:]}"
            pause.wait(0.2)

    def stop(self) -> int:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGINT)
        try:
            return self.proc.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)
            raise

    def assert_every_node_finished_cleanly(self, died: int = 0) -> None:
        text = self.text
        started = text.count("process started with pid")
        assert text.count("process has died") == died, text[-4000:]
        assert text.count("process has finished cleanly") == started - died, text[-4000:]


def _lifecycle(node: Node, name: str) -> tuple[GetState, ChangeState]:
    get = node.create_client(GetState, f"/{name}/get_state")
    change = node.create_client(ChangeState, f"/{name}/change_state")
    assert get.wait_for_service(timeout_sec=60) and change.wait_for_service(timeout_sec=60)
    return get, change


def _call(client, request, timeout_s: float = 30.0):
    done = threading.Event()
    future = client.call_async(request)
    future.add_done_callback(lambda _f: done.set())
    assert done.wait(timeout_s), f"{client.srv_name}: no answer within {timeout_s} s"
    return future.result()


def test_runtime_state_inactive_leaves_the_arms_to_a_supervisor_which_activates_them(ros, tmp_path):
    hosts = free_sim_hosts(251, 254, 2)
    launch = Launch(tmp_path, "dual_franka.launch.py", "use_sim:=true", f"sim_hosts:={','.join(hosts)}",
                    "runtime_state:=inactive", f"output_dir:={tmp_path / 'run'}")
    try:
        supervisor = ros(Node("lab_supervisor"))
        remote = RosToolkit(supervisor, "/toolkit", timeout_s=60)
        remote.wait_ready(180)  # the toolkit node serves once its runtime nodes are configured
        for name in ("arm_left", "gripper_left", "arm_right", "gripper_right"):
            get, _change = _lifecycle(supervisor, name)
            assert _call(get, GetState.Request()).current_state.label == "inactive", name
        state = remote.execute_tool("get_state", {})  # reads are served by inactive nodes
        assert not state.is_error, state.error
        refused = remote.execute_tool("move_by", {"arm": "left", "dz_m": 0.02})
        assert refused.is_error and "start_cartesian refused: /arm_left is inactive" in refused.error, refused.error

        _get, change = _lifecycle(supervisor, "arm_left")
        request = ChangeState.Request()
        request.transition.id = Transition.TRANSITION_ACTIVATE
        assert _call(change, request).success
        moved = remote.execute_tool("move_by", {"arm": "left", "dz_m": 0.02})
        assert not moved.is_error, moved.error
        assert launch.stop() == 0
        launch.assert_every_node_finished_cleanly()
    finally:
        launch.stop()


def test_a_planner_that_cannot_start_ends_the_launch_and_the_toolkit_stops_cleanly(tmp_path):
    launch = Launch(tmp_path, "franka.launch.py", "use_sim:=true", "planner:=replay",
                    "recipe:=robots/franka/recipes/no_such_recipe.jsonl", f"output_dir:={tmp_path / 'run'}")
    try:
        assert launch.proc.wait(120) == 0  # it ends by itself, cleanly
        text = launch.text
        assert "planner_node: parameter recipe: cannot read robots/franka/recipes/no_such_recipe.jsonl" in text
        assert "Traceback" not in text, text[-4000:]
        launch.assert_every_node_finished_cleanly(died=1)
    finally:
        launch.stop()


def test_a_recipe_named_as_in_the_checkout_is_found_from_another_folder(ros, tmp_path, monkeypatch):
    toolkit = ros(ToolkitNode(parameter_overrides=[
        Parameter("robot", value="toy"), Parameter("output_dir", value=str(tmp_path / "node")),
    ]))
    monkeypatch.chdir(tmp_path)  # no robots/ here: the path is the package's
    planner = ros(PlannerNode(parameter_overrides=[
        Parameter("robot", value="toy"), Parameter("recipe", value="robots/toy/recipes/red_block_in_bin.jsonl"),
        Parameter("output_dir", value=str(tmp_path / "planner")),
    ]))
    assert Path(planner.args.recipe).is_absolute() and Path(planner.args.recipe).is_file()
    summary = planner.run_task()
    assert summary["status"] == "finished" and summary["solved"] is True, summary
    assert toolkit.toolkit.solved()
