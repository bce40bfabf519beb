"""Waiting for managed runtime nodes to be configured, for a toolkit node that drives them.

A managed node serves RuntimeCall from the start but refuses every call until configure has
connected its device; a toolkit node that starts beside it (ros2 launch starts both at once) waits
here, as it waited for the action servers, so its first tool call does not meet "unconfigured".
Nodes without the lifecycle services (franka_sim_node) are ready once they serve.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence

from lifecycle_msgs.msg import State
from lifecycle_msgs.srv import GetState
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node

from rpent.runtime.arm import RuntimeFault

CONFIGURED = (State.PRIMARY_STATE_INACTIVE, State.PRIMARY_STATE_ACTIVE)


def node_of(action_name: str) -> str:
    """`/arm_left/left/call` -> `/arm_left` (RuntimeCall is served at `<node>/<runtime>/call`)."""
    return "/" + "/".join(action_name.strip("/").split("/")[:-2])


def wait_configured(node: Node, action_names: Sequence[str], timeout_s: float) -> None:
    """Return once every managed node serving `action_names` is inactive or active; RuntimeFault
    naming the node (and its state) after `timeout_s`."""
    names = sorted({node_of(a) for a in action_names})
    # A probe node with its own executor: the caller's node may not be spinning yet (built in __init__).
    probe = Node("rpent_lifecycle_probe", context=node.context, start_parameter_services=False)
    executor = SingleThreadedExecutor(context=node.context)
    executor.add_node(probe)
    spinner = threading.Thread(target=executor.spin, name="rpent-lifecycle-probe", daemon=True)
    spinner.start()
    deadline = time.monotonic() + timeout_s
    try:
        for name in names:
            _wait_one(probe, name, deadline, timeout_s)
    finally:
        executor.shutdown()
        spinner.join(5.0)
        probe.destroy_node()


def _wait_one(probe: Node, name: str, deadline: float, timeout_s: float) -> None:
    client = probe.create_client(GetState, f"{name}/get_state")
    try:
        if not client.wait_for_service(timeout_sec=1.0):
            return  # not a managed node
        label = "unknown"
        while True:
            future = client.call_async(GetState.Request())
            done = threading.Event()
            future.add_done_callback(lambda _f, done=done: done.set())
            if done.wait(max(0.1, min(2.0, deadline - time.monotonic()))) and future.result() is not None:
                state = future.result().current_state
                if state.id in CONFIGURED:
                    return
                label = state.label
            if time.monotonic() >= deadline:
                raise RuntimeFault(f"runtime node {name} is still {label} after {timeout_s} s; it serves calls once "
                                   f"configured (ros2 lifecycle set {name} configure)")
            time.sleep(0.2)
    finally:
        probe.destroy_client(client)
