"""The ToolkitAPI contract (test/toolkit_conformance.py) held over ROS 2: by RosToolkit (what planner_node and
mcp_bridge_node drive) and by RemoteTask (the dashboard node's toolkit of one task), each against a toy
toolkit_node of its own, over DDS on loopback.

Skipped where rclpy or the generated rpent interfaces cannot be imported.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

rclpy = pytest.importorskip("rclpy", reason="rclpy not importable: ROS 2 is not sourced")
pytest.importorskip("rpent.action", reason="rpent interfaces not generated: colcon build this package and source it")

from rclpy.node import Node  # noqa: E402
from rclpy.parameter import Parameter  # noqa: E402
from toolkit_conformance import CASES, SPEED_M_S, Case  # noqa: E402

from rpent.robot import RunConfig  # noqa: E402
from rpent.tools.api import ToolkitAPI  # noqa: E402
from rpent_ros.operator.remote_robot import RemoteRobot, ToolkitEvents  # noqa: E402
from rpent_ros.toolkit.client import RosToolkit  # noqa: E402
from rpent_ros.toolkit.toolkit_node import ToolkitNode  # noqa: E402

pytestmark = [pytest.mark.ros, pytest.mark.slow, pytest.mark.timeout(180)]


def toy_node(ros: Callable[[Any], Any], tmp_path: Path) -> ToolkitNode:
    return ros(ToolkitNode(parameter_overrides=[
        Parameter("robot", value="toy"), Parameter("output_dir", value=str(tmp_path / "node")),
        Parameter("speed", value=SPEED_M_S),
    ]))


def ros_toolkit(ros: Callable[[Any], Any], tmp_path: Path) -> ToolkitAPI:
    toy_node(ros, tmp_path)
    remote = RosToolkit(ros(Node("conformance_client")), "/toolkit")
    remote.wait_ready(60)
    return remote


def remote_task(ros: Callable[[Any], Any], tmp_path: Path) -> ToolkitAPI:
    toy_node(ros, tmp_path)
    node = ros(Node("conformance_dashboard"))
    remote = RosToolkit(node, "/toolkit")
    remote.wait_ready(60)
    config = RunConfig(robot="toy", task="conformance", output_dir=tmp_path / "task", recipe_tag="conformance")
    return RemoteRobot(remote, ToolkitEvents(node, "/toolkit")).get_toolkit(runtime_kwargs={}, dashboard_events=None,
                                                                              config=config)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.__name__)
@pytest.mark.parametrize("make", [ros_toolkit, remote_task], ids=["RosToolkit", "RemoteTask"])
def test_toolkits_over_ros_keep_the_toolkit_api(case: Case, make: Callable[..., ToolkitAPI], ros, tmp_path) -> None:
    toolkit = make(ros, tmp_path)
    try:
        case(toolkit)
    finally:
        toolkit.cancel_active_and_wait(timeout=30, reason="test over")
