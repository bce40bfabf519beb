"""`ros2 launch rpent dual_franka.launch.py use_sim:=true` brings the whole suite up on loopback.

Needs a sourced ROS 2 with this package built by colcon (skipped otherwise, with the reason).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import threading

import pytest

rclpy = pytest.importorskip("rclpy", reason="rclpy not importable: ROS 2 is not sourced")
pytest.importorskip("rpent.action", reason="rpent interfaces not generated: colcon build this package and source it")
if shutil.which("ros2") is None:
    pytest.skip("the ros2 command is not on PATH", allow_module_level=True)

from rclpy.executors import MultiThreadedExecutor  # noqa: E402
from rclpy.node import Node  # noqa: E402

from rpent_ros.toolkit_client import RosToolkit  # noqa: E402

pytestmark = [pytest.mark.ros, pytest.mark.slow, pytest.mark.timeout(300)]


def test_dual_franka_launch_with_sim_serves_both_arms(tmp_path):
    env = {**os.environ, "ROS_AUTOMATIC_DISCOVERY_RANGE": "LOCALHOST"}
    launch = subprocess.Popen(
        ["ros2", "launch", "rpent", "dual_franka.launch.py", "use_sim:=true", f"output_dir:={tmp_path / 'run'}"],
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
        assert len(moved.images) == 2  # front and top simulated cameras, from the sim node
    finally:
        executor.shutdown()
        node.destroy_node()
        rclpy.try_shutdown()
        os.killpg(launch.pid, signal.SIGINT)
        try:
            launch.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(launch.pid, signal.SIGKILL)
        print(log.read_text()[-5000:])  # shown by pytest when the test failed
