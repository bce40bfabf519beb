"""What the ROS 2 action path adds per tool call, against a bare rclpy action server in the same run.

A toy toolkit_node and a bare rclpy CallTool server (a no-op execute callback, rclpy's defaults) are
spun in this process; the same RosToolkit client (the planner_node/dashboard/MCP bridge client) calls
both over DDS on loopback, first from this process, then (--cross-process, the default) from a child
process. Measured, sequentially, N calls each:

- direct:  `toolkit.execute_tool` on the node's own toolkit (no ROS at all);
- bare:    a CallTool goal -> result on the bare server (the floor of any rclpy action);
- toolkit: `RosToolkit.execute_tool("get_state")` -> CallTool goal -> result on the toolkit node;
- cancel:  a slow toy move_to (a valid target: the toy refuses x < 0) cancelled once it runs, from the
           cancel request to the goal's result; the floor cancels a bare goal that waits for its cancel.

Bare and toolkit calls alternate in blocks of 20, so a drifting machine load biases neither. Ratios
are to the bare server's figures; the goal is a toolkit round trip within 1.5x the bare one.

With SROS2 (--security, the default; --no-security skips it): the toolkit node and the client each in
a process of their own, once unsecured and once secured (a keystore of the shipped policy, made with
`rpent ros-security init`: toolkit in /rpent/toolkit, client in /rpent/planner, DDS-Security's
authentication, access control and encryption), in alternating rounds; the secured round trip and
cancel -> result are given as a ratio to the unsecured ones of the same run (aim <= 1.3x).
Needs a sourced ROS 2 with this package built by colcon (see docs/ros.md); confine DDS to loopback.

Run: source <ros2>/setup.bash && source <ws>/install/setup.bash && python bench/bench_ros.py [--calls 200]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from timing import timed_calls  # bench/timing.py: this script's folder is on sys.path

BARE = "/bench_bare"
SLOW_MOVES = ({"x_m": 0.5, "y_m": 0.2}, {"x_m": 0.1, "y_m": 0.2})  # 0.4 m apart: 8 s at the toy's 0.05 m/s


def _interleaved(fns: dict[str, Any], n: int, block: int = 20) -> dict[str, list[float]]:
    """`n` timed calls of each, in alternating blocks: a machine whose load drifts biases neither."""
    times: dict[str, list[float]] = {name: [] for name in fns}
    while any(len(t) < n for t in times.values()):
        for name, fn in fns.items():
            times[name] += timed_calls(fn, min(block, n - len(times[name])))
    return times


def _cancel_latencies(remote: Any, n: int, first: int = 0) -> list[float]:
    """Cancel -> result of a move that is running (the toy moves; the bare server waits for the cancel)."""
    latencies = []
    for i in range(first, first + n):
        running = threading.Event()
        call = remote.submit("move_to", SLOW_MOVES[i % 2],
                             on_stage=lambda stage, *_, ev=running: stage == "running" and ev.set())
        if not running.wait(10):
            raise RuntimeError(f"move_to {SLOW_MOVES[i % 2]} did not start: {call.result(timeout=1)}")
        started = time.perf_counter()
        call.cancel()
        result = call.result(timeout=30)
        latencies.append(time.perf_counter() - started)
        if not (result.is_error and "cancel" in result.error):
            raise RuntimeError(f"the cancel of move_to {SLOW_MOVES[i % 2]} did not stop it: {result}")
    return latencies


def _measure(node: Any, calls: int, cancels: int) -> dict[str, list[float]]:
    """Client side: the same RosToolkit pattern against the bare server and the toolkit node."""
    from rpent_ros.toolkit.client import RosToolkit

    bare, toolkit = RosToolkit(node, BARE), RosToolkit(node, "/toolkit")
    for remote in (bare, toolkit):
        remote.wait_ready(30)
        for _ in range(10):  # warm up discovery and both paths
            remote.execute_tool("get_state", {})
    figures = _interleaved({"bare": lambda: bare.execute_tool("get_state", {}),
                            "toolkit": lambda: toolkit.execute_tool("get_state", {})}, calls)
    figures["bare_cancel"], figures["toolkit_cancel"] = [], []
    for i in range(cancels):
        figures["bare_cancel"] += _cancel_latencies(bare, 1, i)
        figures["toolkit_cancel"] += _cancel_latencies(toolkit, 1, i)
    return figures


def _bare_server(node: Any, tools_json: str) -> Any:
    """A CallTool server with rclpy's defaults: get_state succeeds at once, move_to runs until cancelled."""
    from rclpy.action import ActionServer, CancelResponse
    from rclpy.callback_groups import ReentrantCallbackGroup

    from rpent.action import CallTool
    from rpent.srv import ListTools

    cancelled: dict[bytes, threading.Event] = {}

    def execute(goal_handle: Any) -> Any:
        if goal_handle.request.tool == "move_to":
            event = cancelled.setdefault(bytes(goal_handle.goal_id.uuid), threading.Event())
            goal_handle.publish_feedback(CallTool.Feedback(stage="running"))
            event.wait(30)
            goal_handle.canceled()
            return CallTool.Result(is_error=True, error="cancelled: ROS cancel request")
        goal_handle.succeed()
        return CallTool.Result(result_json="{}")

    def cancel(goal_handle: Any) -> Any:
        cancelled.setdefault(bytes(goal_handle.goal_id.uuid), threading.Event()).set()
        return CancelResponse.ACCEPT

    def list_tools(_request: Any, response: Any) -> Any:
        response.tools_json = tools_json
        return response

    group = ReentrantCallbackGroup()
    node.create_service(ListTools, f"{BARE}/list_tools", list_tools, callback_group=group)
    return ActionServer(node, CallTool, f"{BARE}/call_tool", execute, cancel_callback=cancel, callback_group=group)


def _client_process(args: argparse.Namespace) -> int:
    from rpent_ros.spinning import spinning_node

    with spinning_node("bench_remote_client") as node:
        figures = _measure(node, args.calls, args.cancels)
    Path(args.client_report).write_text(json.dumps(figures))
    return 0


def _toolkit_client_process(args: argparse.Namespace) -> int:
    """A client of the toolkit node only (no bare server), named as the policy names the planner."""
    from rpent_ros.spinning import spinning_node
    from rpent_ros.toolkit.client import RosToolkit

    with spinning_node("planner") as node:
        toolkit = RosToolkit(node, "/toolkit")
        toolkit.wait_ready(60)
        for _ in range(10):
            toolkit.execute_tool("get_state", {})
        figures = {"toolkit": timed_calls(lambda: toolkit.execute_tool("get_state", {}), args.calls),
                   "toolkit_cancel": _cancel_latencies(toolkit, args.cancels)}
    Path(args.client_report).write_text(json.dumps(figures))
    return 0


def _serve_process(args: argparse.Namespace) -> int:
    """The toy toolkit node alone, until stdin closes."""
    import rclpy
    from rclpy.executors import MultiThreadedExecutor
    from rclpy.parameter import Parameter

    from rpent_ros.spinning import BackgroundSpin
    from rpent_ros.toolkit.toolkit_node import ToolkitNode

    rclpy.init(args=sys.argv)
    with tempfile.TemporaryDirectory() as tmp:
        node = ToolkitNode(parameter_overrides=[Parameter("robot", value="toy"), Parameter("output_dir", value=tmp),
                                                Parameter("speed", value=0.05)])
        executor = MultiThreadedExecutor(num_threads=8)
        executor.add_node(node)
        spinning = BackgroundSpin(executor)
        print("serving", flush=True)
        sys.stdin.read()
        node.shutdown()
        spinning.stop()
        node.destroy_node()
    rclpy.try_shutdown()
    return 0


def _security_rounds(args: argparse.Namespace, rounds: int = 2) -> dict[str, dict[str, list[float]]]:
    """Toolkit node and client in processes of their own, unsecured and secured in alternating rounds."""
    import os

    script = str(Path(__file__).resolve())
    plain = {k: v for k, v in os.environ.items() if not k.startswith("ROS_SECURITY_")}
    figures: dict[str, dict[str, list[float]]] = {"unsecured": {}, "secured": {}}
    with tempfile.TemporaryDirectory() as tmp:
        keystore = Path(tmp) / "keystore"
        subprocess.run([sys.executable, "-m", "rpent", "ros-security", "init", str(keystore)], check=True,
                       capture_output=True, timeout=300, env=plain)
        secured = {**plain, "ROS_SECURITY_ENABLE": "true", "ROS_SECURITY_STRATEGY": "Enforce",
                   "ROS_SECURITY_KEYSTORE": str(keystore)}
        for i in range(rounds):
            for mode, env in (("unsecured", plain), ("secured", secured)):
                enclave = ["--ros-args", "--enclave"] if mode == "secured" else []
                server = subprocess.Popen([sys.executable, script, "--serve", *(enclave and [*enclave, "/rpent/toolkit"])],
                                          stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env, cwd=tmp)
                try:
                    if server.stdout.readline().strip() != "serving":
                        raise RuntimeError("the toolkit node of the security rounds did not start")
                    report = Path(tmp) / f"{mode}-{i}.json"
                    subprocess.run([sys.executable, script, "--toolkit-client", "--calls", str(args.calls), "--cancels",
                                    str(args.cancels), "--client-report", str(report),
                                    *(enclave and [*enclave, "/rpent/planner"])], check=True, env=env, cwd=tmp, timeout=900)
                    for name, values in json.loads(report.read_text()).items():
                        figures[mode].setdefault(name, []).extend(values)
                finally:
                    server.stdin.close()
                    server.wait(60)
    return figures


def _report_security(figures: dict[str, dict[str, list[float]]]) -> None:
    plain, secured = figures["unsecured"], figures["secured"]
    print(f"SROS2 (separate processes, x{len(plain['toolkit'])} calls, x{len(plain['toolkit_cancel'])} cancels each)")
    for name, label in (("toolkit", "CallTool round trip"), ("toolkit_cancel", "cancel -> result")):
        ratio = statistics.median(secured[name]) / statistics.median(plain[name])
        print(f"  unsecured {label:<22} {_ms(plain[name])}")
        print(f"  secured   {label:<22} {_ms(secured[name])}   {ratio:.2f}x unsecured"
              f" (aim <= 1.3x: {'met' if ratio <= 1.3 else 'NOT met'})")


def _ms(values: list[float]) -> str:
    ordered = sorted(values)
    return f"median {statistics.median(values) * 1e3:7.2f} ms   p90 {ordered[max(int(len(ordered) * 0.9) - 1, 0)] * 1e3:7.2f} ms"


def _report(where: str, figures: dict[str, list[float]], calls: int, cancels: int) -> None:
    bare, toolkit = statistics.median(figures["bare"]), statistics.median(figures["toolkit"])
    bare_cancel, toolkit_cancel = statistics.median(figures["bare_cancel"]), statistics.median(figures["toolkit_cancel"])
    print(f"{where}: get_state x{calls}, cancel x{cancels}")
    print(f"  bare rclpy action round trip    {_ms(figures['bare'])}")
    print(f"  toolkit CallTool round trip     {_ms(figures['toolkit'])}   {toolkit / bare:.2f}x bare"
          f" (goal <= 1.5x: {'met' if toolkit <= 1.5 * bare else 'NOT met'})")
    print(f"  bare cancel -> result           {_ms(figures['bare_cancel'])}")
    print(f"  toolkit cancel -> result        {_ms(figures['toolkit_cancel'])}   {toolkit_cancel / bare_cancel:.2f}x bare")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--cancels", type=int, default=10)
    parser.add_argument("--in-process-only", action="store_true", help="skip the client in a child process")
    parser.add_argument("--security", action=argparse.BooleanOptionalAction, default=True,
                        help="also measure with SROS2 against the same run without it (default: on)")
    parser.add_argument("--client-report", help=argparse.SUPPRESS)  # set for the child process
    parser.add_argument("--toolkit-client", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args, _ros_args = parser.parse_known_args()
    try:
        import rclpy
        from rclpy.executors import MultiThreadedExecutor
        from rclpy.node import Node
        from rclpy.parameter import Parameter

        from rpent_ros.spinning import BackgroundSpin
        from rpent_ros.toolkit.conversions import tools_json
        from rpent_ros.toolkit.toolkit_node import ToolkitNode
    except ImportError as exc:
        print(f"skipped: {exc} (source ROS 2 and the colcon workspace of this package)")
        return 0
    if args.serve:
        return _serve_process(args)
    if args.toolkit_client:
        return _toolkit_client_process(args)
    if args.client_report:
        return _client_process(args)

    rclpy.init()
    with tempfile.TemporaryDirectory() as tmp:
        node = ToolkitNode(parameter_overrides=[Parameter("robot", value="toy"), Parameter("output_dir", value=tmp),
                                                Parameter("speed", value=0.05)])
        bare_node = Node("bench_bare")
        server = _bare_server(bare_node, tools_json([t for t in node.toolkit.list_tools() if t.name in ("get_state", "move_to")]))
        client_node = Node("bench_client")
        # One executor per side, as in a deployment where they are separate processes.
        server_executor, client_executor = MultiThreadedExecutor(num_threads=8), MultiThreadedExecutor(num_threads=4)
        server_executor.add_node(node)
        server_executor.add_node(bare_node)
        client_executor.add_node(client_node)
        spinnings = [BackgroundSpin(server_executor), BackgroundSpin(client_executor)]
        try:
            for _ in range(10):
                node.toolkit.execute_tool("get_state", {})
            direct = timed_calls(lambda: node.toolkit.execute_tool("get_state", {}), args.calls)
            in_process = _measure(client_node, args.calls, args.cancels)
            cross = None
            if not args.in_process_only:
                report = Path(tmp) / "client.json"
                subprocess.run([sys.executable, str(Path(__file__).resolve()), "--calls", str(args.calls),
                                "--cancels", str(args.cancels), "--client-report", str(report)],
                               check=True, cwd=tmp, timeout=600)
                cross = json.loads(report.read_text())
        finally:
            node.shutdown()
            for spinning in spinnings:
                spinning.stop()
            server.destroy()
            for each in (node, bare_node, client_node):
                each.destroy_node()
            rclpy.try_shutdown()

    print(f"direct toolkit.execute_tool (no ROS)   {_ms(direct)}")
    _report("in-process client", in_process, args.calls, args.cancels)
    if cross is not None:
        _report("cross-process client", cross, args.calls, args.cancels)
    if args.security:
        _report_security(_security_rounds(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
