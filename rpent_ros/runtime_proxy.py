"""Runtime Protocols (Arm, Gripper, Camera, Policy) implemented over a runtime node's RuntimeCall
action, so a toolkit node drives arms that live in other nodes or on other machines."""

from __future__ import annotations

import threading
from typing import Any

from rclpy.action import ActionClient
from rclpy.node import Node

from rpent.action import RuntimeCall
from rpent.runtime.arm import RuntimeFault
from rpent_ros.runtime_codec import decode_result, encode_call


class RemoteRuntimeError(RuntimeFault):
    """The runtime node reported an error (its text names the remote exception)."""


class RuntimeProxy:
    """Calls `<node>/<name>/call`; method calls block until the remote call ends.

    A `cancel=` threading.Event argument is not sent: setting it cancels the remote goal, which
    stops the remote runtime at once.
    """

    def __init__(self, node: Node, action_name: str, name: str | None = None, timeout_s: float = 120.0) -> None:
        self.node = node
        self.action_name = action_name
        self.name = name or action_name.strip("/").split("/")[-2]
        self.timeout_s = timeout_s
        self._client = ActionClient(node, RuntimeCall, action_name)
        self._active: set[Any] = set()
        self._lock = threading.Lock()

    def wait_ready(self, timeout_s: float = 30.0) -> None:
        if not self._client.wait_for_server(timeout_sec=timeout_s):
            raise RemoteRuntimeError(f"runtime node action {self.action_name} did not appear within {timeout_s} s")

    def call(self, method: str, *args: Any, cancel: threading.Event | None = None, **kwargs: Any) -> Any:
        done = threading.Event()
        box: dict[str, Any] = {}

        def on_result(future: Any) -> None:
            box["response"] = future.result()
            done.set()

        def on_goal(future: Any) -> None:
            handle = future.result()
            if not handle.accepted:
                box["error"] = f"{self.action_name}: goal {method} rejected"
                done.set()
                return
            box["handle"] = handle
            handle.get_result_async().add_done_callback(on_result)

        goal = RuntimeCall.Goal(method=method, args_json=encode_call(args, kwargs))
        self._client.send_goal_async(goal).add_done_callback(on_goal)
        while not done.wait(0.005 if cancel is not None else self.timeout_s):
            if cancel is not None and cancel.is_set() and "handle" in box and not box.get("cancel_sent"):
                box["cancel_sent"] = True
                box["handle"].cancel_goal_async()
            elif cancel is None:
                raise RemoteRuntimeError(f"{self.action_name}: {method} gave no answer within {self.timeout_s} s")
        if "error" in box:
            raise RemoteRuntimeError(box["error"])
        result = box["response"].result
        if result.is_error:
            raise RemoteRuntimeError(f"{self.name}.{method}: {result.error}")
        return decode_result(result.result_json)

    def __getattr__(self, method: str) -> Any:
        if method.startswith("_"):
            raise AttributeError(method)
        return lambda *args, **kwargs: self.call(method, *args, **kwargs)

    def stop(self) -> None:
        # Stop must not wait behind a running wait(): it is its own goal, served concurrently.
        self.call("stop")

    def close(self) -> None:
        """The runtime belongs to its node; closing the proxy leaves it running."""
