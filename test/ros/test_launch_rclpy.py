"""`ros2 launch rpent dual_franka.launch.py use_sim:=true` brings the whole suite up on loopback.

Needs a sourced ROS 2 with this package built by colcon (skipped otherwise, with the reason).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import threading
import time

import numpy as np
import pytest

rclpy = pytest.importorskip("rclpy", reason="rclpy not importable: ROS 2 is not sourced")
pytest.importorskip("rpent.action", reason="rpent interfaces not generated: colcon build this package and source it")
if shutil.which("ros2") is None:
    pytest.skip("the ros2 command is not on PATH", allow_module_level=True)

from rclpy.executors import MultiThreadedExecutor  # noqa: E402
from rclpy.node import Node  # noqa: E402
from sim_process import free_sim_hosts  # noqa: E402

from rpent.record.steps import read_steps  # noqa: E402
from rpent_ros.toolkit.client import RosToolkit  # noqa: E402

pytestmark = [pytest.mark.ros, pytest.mark.slow, pytest.mark.timeout(300)]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _dashboard_state(port: int, deadline_s: float) -> dict:
    """The dashboard's /api/state once it answers with its shared component ready (polled until the deadline)."""
    import httpx

    deadline = time.monotonic() + deadline_s
    last: object = None
    while time.monotonic() < deadline:
        try:
            state = httpx.get(f"http://127.0.0.1:{port}/api/state", timeout=5).json()
            if state["session"]["status"] == "ready":
                return state
            last = state
        except httpx.TransportError as exc:  # not listening yet
            last = exc
        time.sleep(0.5)
    raise AssertionError(f"the dashboard was not ready within {deadline_s} s: {last}")


def test_dual_franka_launch_with_sim_serves_both_arms(tmp_path):
    env = {**os.environ, "ROS_AUTOMATIC_DISCOVERY_RANGE": "LOCALHOST"}
    port = _free_port()
    launch = subprocess.Popen(
        ["ros2", "launch", "rpent", "dual_franka.launch.py", "use_sim:=true", f"sim_hosts:={','.join(free_sim_hosts(225, 230, 2))}",
         f"output_dir:={tmp_path / 'run'}",
         "dashboard:=true", f"dashboard_port:={port}"],
        env=env, stdout=open(tmp_path / "launch.log", "wb"), stderr=subprocess.STDOUT, start_new_session=True,  # noqa: SIM115
    )
    rclpy.init()
    executor = MultiThreadedExecutor(num_threads=8)
    node = Node("launch_test_client")
    executor.add_node(node)
    threading.Thread(target=executor.spin, daemon=True).start()
    log = tmp_path / "launch.log"
    try:
        remote = RosToolkit(node, "/toolkit", timeout_s=60)
        remote.wait_ready(180)
        names = {t.name for t in remote.list_tools()}
        assert {"move_to", "move_both_to", "grasp", "get_state", "capture_images"} <= names
        state = remote.execute_tool("get_state", {})
        assert not state.is_error, state.error
        assert set(state.data["arms"]) == {"left", "right"}
        moved = remote.execute_tool("move_by", {"arm": "left", "dz_m": 0.02})
        assert not moved.is_error, moved.error
        # The sim node's cameras, fixed then wrist, as in process; each frame crossed RuntimeCall whole.
        assert [c["name"] for c in moved.data["cameras"]] == ["front", "top", "left_wrist", "right_wrist"]
        assert len(moved.images) == 4 and all(c["back_project"] for c in moved.data["cameras"])
        point = remote.execute_tool("back_project", {"arm": "right", "camera": "top", "row": 120, "col": 160})
        assert not point.is_error, point.error
        # The top camera looks down at the table top's point (0.55, 0, 0.20) of the world; the right
        # arm's base stands at y = -0.25.
        assert point.data["frame"] == "right_link0" and point.data["calibrated"]
        assert np.allclose(point.data["xyz_m"], (0.55, 0.25, 0.20), atol=0.005), point.data
        # dashboard:=true serves the operator page on loopback, attached to the same toolkit node.
        state = _dashboard_state(port, 60)
        assert state["robot"] == "dual_franka"
        assert [(c["name"], c["status"]) for c in state["components"]] == [("toolkit", "ready")]

        # Ctrl-C on `ros2 launch` during a slow motion (SIGINT to the whole process group, as a terminal
        # sends it; launch forwards it again): the motion is stopped short, the toolkit node saves the
        # record, and every node exits cleanly.
        running = threading.Event()
        remote.submit("move_by", {"arm": "left", "dz_m": 0.09, "speed_factor": 0.05},
                      on_stage=lambda stage, *_: stage == "running" and running.set())
        assert running.wait(60)
        os.killpg(launch.pid, signal.SIGINT)
        launch.wait(timeout=60)
        steps = read_steps(tmp_path / "run" / "steps.jsonl")
        # Stopped by the toolkit node's cancel or by the arm node's own stop, whichever ran first.
        assert steps[-1]["tool"] == "move_by" and steps[-1]["error"], steps[-1]
        assert (tmp_path / "run" / "episode.mp4").stat().st_size > 0
        text = log.read_text()
        started = text.count("process started with pid")
        assert started >= 7 and "process has died" not in text and text.count("process has finished cleanly") == started
        # Every node was gone within launch's 5 s of SIGINT: launch never had to escalate.
        assert "sending signal 'SIGTERM'" not in text and "sending signal 'SIGKILL'" not in text
    finally:
        executor.shutdown()
        node.destroy_node()
        rclpy.try_shutdown()
        if launch.poll() is None:
            os.killpg(launch.pid, signal.SIGINT)
            try:
                launch.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(launch.pid, signal.SIGKILL)
        print(log.read_text()[-5000:])  # shown by pytest when the test failed
