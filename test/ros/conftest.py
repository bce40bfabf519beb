"""The `ros` fixture of the rclpy tests: one context and executor per test, nodes stopped in order.

Imports rclpy only when a test asks for the fixture, so the ROS-free tests here run without ROS 2.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest


@pytest.fixture
def ros() -> Iterator[Callable[[Any], Any]]:
    """`ros(node)` adds a node to a spinning multi-threaded executor and returns it.

    Teardown: nodes with a `shutdown()` (toolkit and runtime nodes) stop motion and save their
    record while the executor still spins, then the executor stops and the nodes are destroyed.
    """
    rclpy = pytest.importorskip("rclpy", reason="rclpy not importable: ROS 2 is not sourced")
    from rclpy.executors import MultiThreadedExecutor

    from rpent_ros.spinning import BackgroundSpin

    rclpy.init()
    executor = MultiThreadedExecutor(num_threads=16)
    nodes: list[Any] = []

    def add(node: Any) -> Any:
        nodes.append(node)
        executor.add_node(node)
        return node

    spinning = BackgroundSpin(executor)
    try:
        yield add
    finally:
        for node in reversed(nodes):
            shutdown = getattr(node, "shutdown", None)
            if callable(shutdown):
                shutdown()
        spinning.stop()
        for node in nodes:
            node.destroy_node()
        rclpy.try_shutdown()
