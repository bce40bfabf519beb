"""The latched stop over ROS: `/toolkit/stop` (std_srvs/Trigger) cancels the running goal and refuses every
motion goal until `/toolkit/release_stop`; `/toolkit/status` shows the latch; a toolkit node started again
for the robot comes up stopped. (Who may call which service under SROS2: test_security_launch_rclpy.py.)"""

from __future__ import annotations

import json

import pytest

rclpy = pytest.importorskip("rclpy", reason="rclpy not importable: ROS 2 is not sourced")
pytest.importorskip("rpent.action", reason="rpent interfaces not generated: colcon build this package and source it")

from rclpy.node import Node  # noqa: E402
from rclpy.parameter import Parameter  # noqa: E402
from std_srvs.srv import Trigger  # noqa: E402

from rpent_ros.toolkit.client import RosToolkit  # noqa: E402
from rpent_ros.toolkit.toolkit_node import ToolkitNode  # noqa: E402

from .services import call_service, latch_of  # noqa: E402

pytestmark = [pytest.mark.ros, pytest.mark.slow, pytest.mark.timeout(120)]
RELEASE = "an operator must release it"


def toy_node(ros, tmp_path, name: str, namespace: str = "/") -> ToolkitNode:
    return ros(ToolkitNode(namespace=namespace, parameter_overrides=[
        Parameter("robot", value="toy"), Parameter("output_dir", value=str(tmp_path / name)),
        Parameter("speed", value=0.02), Parameter("state_dir", value=str(tmp_path / "state"))]))


def test_the_stop_service_cancels_the_running_goal_and_holds_until_released(ros, tmp_path):
    toolkit_node = toy_node(ros, tmp_path, "node")
    client = ros(Node("latch_client"))
    remote = RosToolkit(client, "/toolkit")
    remote.wait_ready(30)
    world = toolkit_node.runtime_kwargs["world"]
    moving = remote.submit("move_to", {"x_m": 0.5, "y_m": 0.5})
    assert latch_of(client) == {"latched": False}

    stopped = call_service(client, Trigger, "/toolkit/stop")
    assert stopped.success and stopped.message.endswith(RELEASE), stopped.message
    result = moving.result(timeout=30)
    assert result.is_error and result.error == f"cancelled: {stopped.message}", result.error
    where = list(world.gripper_xyz)
    refused = remote.execute_tool("move_to", {"x_m": 0.1, "y_m": 0.1})
    assert refused.is_error and refused.error == stopped.message
    assert list(world.gripper_xyz) == where  # nothing moved
    assert not remote.execute_tool("get_state", {}).is_error  # read-only tools go on
    latch = latch_of(client)
    assert latch["latched"] is True and latch["by"] == "ROS /toolkit/stop" and latch["line"] == stopped.message

    released = call_service(client, Trigger, "/toolkit/release_stop")
    assert released.success and released.message == "released"
    assert not call_service(client, Trigger, "/toolkit/release_stop").success  # nothing left to release
    assert not remote.execute_tool("move_to", {"x_m": 0.3, "y_m": 0.3}).is_error


def test_a_toolkit_node_started_again_for_the_robot_comes_up_stopped(ros, tmp_path):
    first = toy_node(ros, tmp_path, "first")
    client = ros(Node("latch_client"))
    stopped = call_service(client, Trigger, "/toolkit/stop")
    assert first.stop_latch.latched
    # Another toolkit node for the robot, as launch starts one again: it reads the robot's state dir.
    toy_node(ros, tmp_path, "second", namespace="/again")
    latch = latch_of(client, "/again/toolkit")
    assert latch["latched"] is True and latch["line"] == stopped.message
    remote = RosToolkit(client, "/again/toolkit")
    remote.wait_ready(30)
    refused = remote.execute_tool("move_to", {"x_m": 0.1, "y_m": 0.1})
    assert refused.is_error and refused.error == stopped.message
    assert json.loads((tmp_path / "second" / "stop_latch.json").read_text())["latched"] is True
    assert call_service(client, Trigger, "/again/toolkit/release_stop").success
    assert not remote.execute_tool("move_to", {"x_m": 0.1, "y_m": 0.1}).is_error
