"""A ROS service called from a test's node, every wait bounded; and the latched stop as /toolkit/status
shows it. Imported by tests that have already checked that rclpy and the rpent interfaces import."""

from __future__ import annotations

import json
import threading
import time
from typing import Any

from rclpy.node import Node

from rpent.srv import GetStatus


def call_service(node: Node, kind: Any, service: str, timeout_s: float = 30.0, resend_s: float | None = None) -> Any:
    """`service`'s answer to an empty request of `kind`; with `resend_s`, for a request that changes nothing,
    the request goes out again every `resend_s` until an answer comes."""
    client = node.create_client(kind, service)
    deadline = time.monotonic() + timeout_s
    assert client.wait_for_service(timeout_sec=timeout_s), f"{service} did not appear"
    done = threading.Event()
    futures = []
    while True:
        futures.append(client.call_async(kind.Request()))
        futures[-1].add_done_callback(lambda _f: done.set())
        left = deadline - time.monotonic()
        if done.wait(max(0.0, min(left, resend_s or left))):
            return next(f for f in futures if f.done()).result()
        assert time.monotonic() < deadline, f"{service}: no answer within {timeout_s} s"


def latch_of(node: Node, toolkit: str = "/toolkit", timeout_s: float = 30.0) -> dict[str, Any]:
    """The latched stop as `<toolkit>/status` shows it. The query is sent again every 5 s: a toolkit node
    started again answers only once DDS has matched it with this client, and wait_for_service is already
    satisfied by the killed node's endpoints, which discovery keeps until their lease runs out."""
    answer = call_service(node, GetStatus, f"{toolkit}/status", timeout_s, resend_s=5.0)
    return json.loads(answer.status_json)["stop_latch"]
