"""A ROS service called from a test's node, every wait bounded; and the latched stop as /toolkit/status
shows it. Imported by tests that have already checked that rclpy and the rpent interfaces import."""

from __future__ import annotations

import json
import threading
from typing import Any

from rclpy.node import Node

from rpent.srv import GetStatus


def call_service(node: Node, kind: Any, service: str, timeout_s: float = 30.0) -> Any:
    """`service`'s answer to an empty request of `kind`."""
    client = node.create_client(kind, service)
    assert client.wait_for_service(timeout_sec=timeout_s), f"{service} did not appear"
    done = threading.Event()
    future = client.call_async(kind.Request())
    future.add_done_callback(lambda _f: done.set())
    assert done.wait(timeout_s), f"{service}: no answer within {timeout_s} s"
    return future.result()


def latch_of(node: Node, toolkit: str = "/toolkit", timeout_s: float = 30.0) -> dict[str, Any]:
    """The latched stop as `<toolkit>/status` shows it."""
    return json.loads(call_service(node, GetStatus, f"{toolkit}/status", timeout_s).status_json)["stop_latch"]
