"""What the ROS 2 action path adds per tool call, against the same toolkit called directly.

A toy toolkit_node is spun in this process; a RosToolkit client (the planner_node/dashboard/MCP
bridge client) calls it over DDS on loopback. Measured, sequentially, N calls each:

- direct: `toolkit.execute_tool` on the node's own toolkit (the floor);
- ros:    `RosToolkit.execute_tool` -> CallTool goal -> result (feedback included);
- cancel: a slow toy move cancelled through ROS, from the cancel request to the goal's result.

Needs a sourced ROS 2 with this package built by colcon (see docs/ros.md); confine DDS to loopback first.

Run: source <ros2>/setup.bash && source <ws>/install/setup.bash && python bench/bench_ros.py [--calls 200]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
from typing import Any


def _timed(fn: Any, n: int) -> list[float]:
    times = []
    for _ in range(n):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return times


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--cancels", type=int, default=10)
    args = parser.parse_args()
    try:
        import rclpy
        from rclpy.executors import MultiThreadedExecutor
        from rclpy.node import Node
        from rclpy.parameter import Parameter

        from rpent_ros.spinning import BackgroundSpin
        from rpent_ros.toolkit_client import RosToolkit
        from rpent_ros.toolkit_node import ToolkitNode
    except ImportError as exc:
        print(f"skipped: {exc} (source ROS 2 and the colcon workspace of this package)")
        return 0

    rclpy.init()
    with tempfile.TemporaryDirectory() as tmp:
        node = ToolkitNode(parameter_overrides=[Parameter("robot", value="toy"), Parameter("output_dir", value=tmp),
                                                Parameter("speed", value=0.05)])
        client_node = Node("bench_client")
        # One executor per side, as in a deployment where they are separate processes.
        server_executor, client_executor = MultiThreadedExecutor(num_threads=16), MultiThreadedExecutor(num_threads=4)
        server_executor.add_node(node)
        client_executor.add_node(client_node)
        spinnings = [BackgroundSpin(server_executor), BackgroundSpin(client_executor)]
        try:
            remote = RosToolkit(client_node, "/toolkit")
            remote.wait_ready(30)
            for _ in range(10):  # warm up discovery and both paths
                remote.execute_tool("get_state", {})
                node.toolkit.execute_tool("get_state", {})
            direct = _timed(lambda: node.toolkit.execute_tool("get_state", {}), args.calls)
            ros = _timed(lambda: remote.execute_tool("get_state", {}), args.calls)
            cancels = []
            for i in range(args.cancels):
                running = threading.Event()
                call = remote.submit("move_to", {"x_m": 0.3 if i % 2 else -0.3, "y_m": 0.2},
                                     on_stage=lambda stage, *_, ev=running: stage == "running" and ev.set())
                running.wait(10)
                started = time.perf_counter()
                call.cancel()
                call.result(timeout=30)
                cancels.append(time.perf_counter() - started)
        finally:
            node.shutdown()
            for spinning in spinnings:
                spinning.stop()
            node.destroy_node()
            client_node.destroy_node()
            rclpy.try_shutdown()

    def ms(values: list[float]) -> str:
        ordered = sorted(values)
        return (f"median {statistics.median(values) * 1e3:7.2f} ms   p90 {ordered[int(len(ordered) * 0.9) - 1] * 1e3:7.2f} ms")

    floor = statistics.median(direct)
    print(f"get_state x{args.calls} (readonly, toy robot)")
    print(f"  direct toolkit.execute_tool   {ms(direct)}")
    print(f"  ROS CallTool via RosToolkit   {ms(ros)}   +{(statistics.median(ros) - floor) * 1e3:.2f} ms per call"
          f" ({statistics.median(ros) / floor:.1f}x the floor)")
    print(f"cancel -> goal result x{args.cancels}   {ms(cancels)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
