"""rpent_ros.action_client.ThreadSafeActionClient is whole before its node can hand it a message.

rclpy's ActionClient registers itself with its node at the end of its constructor; from then on an
executor spinning that node may execute it, and a client hears every goal status the server publishes
(other clients' goals too), so a message can come before the constructor has returned. CI saw one:
the lock that orders responses after their requests did not exist yet, the executor's thread died
on the AttributeError and every call through that node waited for ever.
"""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("rclpy", reason="rclpy not importable: ROS 2 is not sourced")
pytest.importorskip("rpent.action", reason="rpent interfaces not generated: colcon build this package and source it")

from action_msgs.msg import GoalStatusArray
from rclpy.action import ActionClient
from rclpy.node import Node

from rpent.action import CallTool
from rpent_ros.action_client import ThreadSafeActionClient

pytestmark = [pytest.mark.ros, pytest.mark.timeout(60)]


def test_a_status_message_the_executor_hands_over_the_moment_the_client_is_registered_is_processed(ros) -> None:
    handled: list[Any] = []

    class Spun(Node):
        """A node whose executor executes a newly registered waitable at once, with a goal status message."""

        def add_waitable(self, waitable: Any) -> None:
            super().add_waitable(waitable)
            if not isinstance(waitable, ActionClient):  # the node's own publishers' event handlers
                return
            step = waitable.execute({"status": GoalStatusArray()})
            try:
                step.send(None)
            except StopIteration:
                handled.append(waitable)

    node = ros(Spun("spun"))
    client = ThreadSafeActionClient(node, CallTool, "/toolkit/call_tool")
    assert handled == [client]
