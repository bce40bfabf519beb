"""A ROS client in a process of its own, for the tests of who may reach a launch's nodes.

Its environment and `--ros-args` decide who it is (security, enclave, network namespace); it prints
one JSON line with what it saw. Every wait is bounded by --timeout.

    python graph_client.py discover /toolkit/call_tool --timeout 15      {"found": false}
    python graph_client.py call move_by '{"arm": "left", "dz_m": 0.02}'  {"ok": true, "error": null}
    python graph_client.py trigger /toolkit/stop                          {"found": true, "success": true, ...}
    python graph_client.py listen /joint_states,/tf --timeout 20         {"counts": {"/joint_states": 12, "/tf": 30}}
    python graph_client.py displays /tf,/left/robot_description --subscriber rviz,transform_listener_impl
        {"/tf": {"received": 3, "subscribers": ["rviz", ...]}, ...}: a message seen on each topic, and who else reads it
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time

import rclpy
from rclpy.executors import MultiThreadedExecutor
from rclpy.node import Node

TOPIC_TYPES = {"/joint_states": ("sensor_msgs.msg", "JointState"), "/tf": ("tf2_msgs.msg", "TFMessage"),
               "/diagnostics": ("diagnostic_msgs.msg", "DiagnosticArray")}


def discover(node: Node, action: str, timeout_s: float) -> dict:
    from rpent.action import CallTool
    from rpent_ros.action_client import ThreadSafeActionClient

    client = ThreadSafeActionClient(node, CallTool, action)
    return {"found": bool(client.wait_for_server(timeout_sec=timeout_s))}


def call(node: Node, tool: str, arguments: str, timeout_s: float) -> dict:
    from rpent_ros.toolkit.client import RosToolkit

    toolkit = RosToolkit(node, "/toolkit", timeout_s=timeout_s)
    toolkit.wait_ready(timeout_s)
    result = toolkit.execute_tool(tool, json.loads(arguments))
    return {"ok": not result.is_error, "error": result.error, "data": result.data}


def trigger(node: Node, service: str, timeout_s: float) -> dict:
    """Call a std_srvs/Trigger service (the toolkit's stop and release_stop)."""
    from std_srvs.srv import Trigger

    client = node.create_client(Trigger, service)
    if not client.wait_for_service(timeout_sec=timeout_s):
        return {"found": False}
    done = threading.Event()
    future = client.call_async(Trigger.Request())
    future.add_done_callback(lambda _f: done.set())
    if not done.wait(timeout_s):
        return {"found": True, "answered": False}
    response = future.result()
    return {"found": True, "answered": True, "success": response.success, "message": response.message}


def listen(node: Node, topics: str, timeout_s: float) -> dict:
    import importlib

    from rclpy.qos import qos_profile_sensor_data

    counts = {topic: 0 for topic in topics.split(",")}
    lock = threading.Lock()

    def seen(topic: str, _msg: object) -> None:
        with lock:
            counts[topic] += 1

    for topic in counts:
        module, name = TOPIC_TYPES[topic]
        kind = getattr(importlib.import_module(module), name)
        node.create_subscription(kind, topic, lambda msg, t=topic: seen(t, msg), qos_profile_sensor_data)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with lock:
            if all(n >= 3 for n in counts.values()):
                break
        threading.Event().wait(0.1)
    with lock:
        return {"counts": dict(counts)}


def displays(node: Node, topics: str, subscriber: str, timeout_s: float) -> dict:
    """Until each topic has carried a message and a node named with one of the `subscriber` prefixes
    (comma-separated) reads it, or the timeout: per topic, the messages seen and the nodes subscribed.
    Types come from the graph; latched topics are read latched."""
    from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy, qos_profile_sensor_data
    from rosidl_runtime_py.utilities import get_message

    wanted = topics.split(",")
    counts = {topic: 0 for topic in wanted}
    subscribed: set[str] = set()
    lock = threading.Lock()
    latched = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL)

    def seen(topic: str, _msg: object) -> None:
        with lock:
            counts[topic] += 1

    deadline = time.monotonic() + timeout_s
    pause = threading.Event()
    while time.monotonic() < deadline:
        types = dict(node.get_topic_names_and_types())
        for topic in wanted:
            if topic not in subscribed and topic in types:
                qos = latched if topic.endswith(("robot_description", "tf_static", "keep_out_zones")) else qos_profile_sensor_data
                node.create_subscription(get_message(types[topic][0]), topic, lambda m, t=topic: seen(t, m), qos)
                subscribed.add(topic)
        readers = {t: sorted(i.node_name for i in node.get_subscriptions_info_by_topic(t)) for t in wanted}
        prefixes = tuple(subscriber.split(","))
        with lock:
            done = all(counts[t] > 0 and any(r.startswith(prefixes) for r in readers[t]) for t in wanted)
        if done:
            break
        pause.wait(0.2)
    with lock:
        return {t: {"received": counts[t], "subscribers": readers[t]} for t in wanted}


def main() -> int:
    argv = rclpy.utilities.remove_ros_args(sys.argv)[1:]
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=("discover", "call", "trigger", "listen", "displays"))
    parser.add_argument("target")
    parser.add_argument("arguments", nargs="?", default="{}")
    parser.add_argument("--timeout", type=float, default=15.0)
    parser.add_argument("--name", default="graph_client")
    parser.add_argument("--subscriber", default="rviz", help="displays: prefixes of the nodes that must read each topic")
    args = parser.parse_args(argv)
    rclpy.init(args=sys.argv)
    node = Node(args.name)
    executor = MultiThreadedExecutor(num_threads=4)
    executor.add_node(node)
    threading.Thread(target=executor.spin, daemon=True).start()
    try:
        if args.mode == "discover":
            report = discover(node, args.target, args.timeout)
        elif args.mode == "call":
            report = call(node, args.target, args.arguments, args.timeout)
        elif args.mode == "trigger":
            report = trigger(node, args.target, args.timeout)
        elif args.mode == "listen":
            report = listen(node, args.target, args.timeout)
        else:
            report = displays(node, args.target, args.subscriber, args.timeout)
    except Exception as exc:  # what the client met, for the test to judge
        report = {"exception": f"{type(exc).__name__}: {exc}"}
    print(json.dumps(report, default=str), flush=True)
    executor.shutdown()
    node.destroy_node()
    rclpy.try_shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
