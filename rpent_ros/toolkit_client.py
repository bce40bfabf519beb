"""RosToolkit: the Toolkit API over a remote toolkit_node's actions, so planners and the MCP bridge
run unchanged against a robot that lives in another process or on another machine."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rclpy.node import Node

from rpent.action import CallTool
from rpent.srv import CloseTask, GetStatus, ListTools, NewTask
from rpent.tools import ToolResult
from rpent_ros.action_client import ThreadSafeActionClient
from rpent_ros.conversions import result_from_fields

StageCallback = Callable[[str, str, "float | None"], Any]


class RemoteError(RuntimeError):
    pass


@dataclass(frozen=True)
class RemoteTool:
    """What planners read of a tool; validation happens in the toolkit node."""

    name: str
    description: str
    input_schema: dict[str, Any]
    readonly: bool

    def validate(self, arguments: dict[str, Any]) -> dict[str, Any]:
        return arguments

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "description": self.description, "input_schema": self.input_schema, "readonly": self.readonly}


def _wait(future: Any, timeout: float | None, what: str) -> Any:
    """Wait for an rclpy future that another thread's executor completes."""
    done = threading.Event()
    future.add_done_callback(lambda _f: done.set())
    if not done.wait(timeout):
        raise RemoteError(f"{what}: no answer within {timeout} s")
    return future.result()


class RemoteCall:
    """A handle like rpent.tools.ToolCall: result(), cancel(), done(), stage."""

    def __init__(self, client: RosToolkit, name: str, arguments: Any, on_stage: StageCallback | None) -> None:
        self.name = name
        self.stage = "sending"
        self._on_stage = on_stage
        self._done = threading.Event()
        self._result: ToolResult | None = None
        self._goal_handle: Any = None
        self._cancel_requested = False
        self._lock = threading.Lock()
        self.status: int | None = None  # action_msgs/GoalStatus of the finished goal
        goal = CallTool.Goal(tool=name, arguments_json=arguments if isinstance(arguments, str) else json.dumps(arguments or {}))
        future = client._action.send_goal_async(goal, feedback_callback=self._feedback)
        future.add_done_callback(self._goal_response)

    def _set_stage(self, stage: str, message: str = "", progress: float | None = None) -> None:
        self.stage = stage
        if self._on_stage is not None:
            self._on_stage(stage, message, progress)

    def _feedback(self, feedback_msg: Any) -> None:
        fb = feedback_msg.feedback
        if fb.stage != "done":  # "done" is reported once the result is here
            self._set_stage(fb.stage, fb.message, fb.progress if fb.progress >= 0 else None)

    def _goal_response(self, future: Any) -> None:
        handle = future.result()
        if not handle.accepted:
            self._finish(ToolResult(error=f"goal for '{self.name}' was rejected by the toolkit node"))
            return
        with self._lock:
            self._goal_handle = handle
            cancel = self._cancel_requested
        if cancel:
            handle.cancel_goal_async()
        handle.get_result_async().add_done_callback(self._got_result)

    def _got_result(self, future: Any) -> None:
        response = future.result()
        self.status = response.status
        r = response.result
        self._finish(result_from_fields(r.is_error, r.error, r.result_json, [(i.format, bytes(i.data)) for i in r.images]))

    def _finish(self, result: ToolResult) -> None:
        self._result = result
        self._set_stage("done")
        self._done.set()

    def done(self) -> bool:
        return self._done.is_set()

    def result(self, timeout: float | None = None) -> ToolResult:
        if not self._done.wait(timeout):
            raise TimeoutError(f"remote call {self.name} did not finish within {timeout} s")
        assert self._result is not None
        return self._result

    def cancel(self, reason: str = "cancelled") -> bool:
        with self._lock:
            if self._done.is_set():
                return False
            self._cancel_requested = True
            handle = self._goal_handle
        if handle is not None:
            handle.cancel_goal_async()
        return True


class RosToolkit:
    """Implements list_tools, execute_tool, submit, cancel_active_and_wait, finish_result and solved()
    against `<namespace>/call_tool`, `<namespace>/list_tools` and `<namespace>/status`.

    The given node must be spun by an executor in another thread.
    """

    def __init__(self, node: Node, namespace: str = "/toolkit", timeout_s: float = 30.0) -> None:
        self.node = node
        self.namespace = namespace.rstrip("/")
        self.timeout_s = timeout_s
        self._action = ThreadSafeActionClient(node, CallTool, f"{self.namespace}/call_tool")
        self._list = node.create_client(ListTools, f"{self.namespace}/list_tools")
        self._status = node.create_client(GetStatus, f"{self.namespace}/status")
        self._new_task = node.create_client(NewTask, f"{self.namespace}/new_task")
        self._close_task = node.create_client(CloseTask, f"{self.namespace}/close_task")
        self._active: set[RemoteCall] = set()
        self._lock = threading.Lock()
        self._tools: list[RemoteTool] | None = None

    def wait_ready(self, timeout_s: float | None = None) -> None:
        timeout = self.timeout_s if timeout_s is None else timeout_s
        if not self._action.wait_for_server(timeout_sec=timeout) or not self._list.wait_for_service(timeout_sec=timeout):
            raise RemoteError(f"toolkit node at {self.namespace} did not appear within {timeout} s")

    def list_tools(self, include_read_image: bool = True) -> list[RemoteTool]:
        if self._tools is None:
            response = _wait(self._list.call_async(ListTools.Request()), self.timeout_s, f"{self.namespace}/list_tools")
            self._tools = [RemoteTool(**t) for t in json.loads(response.tools_json)]
        return [t for t in self._tools if include_read_image or t.name != "read_image"]

    def get_tool(self, name: str) -> RemoteTool | None:
        return next((t for t in self.list_tools() if t.name == name), None)

    def submit(self, name: str, arguments: Any = None, *, on_stage: StageCallback | None = None) -> RemoteCall:
        call = RemoteCall(self, name, arguments, on_stage)
        with self._lock:
            self._active = {c for c in self._active if not c.done()}
            self._active.add(call)
        return call

    def _forget(self, call: RemoteCall) -> None:
        with self._lock:
            self._active.discard(call)

    def execute_tool(self, name: str, arguments: Any = None) -> ToolResult:
        call = self.submit(name, arguments)
        try:
            return call.result()
        finally:
            self._forget(call)

    def cancel_active_and_wait(self, timeout: float | None = None, reason: str = "cancelled") -> bool:
        with self._lock:
            calls = [c for c in self._active if not c.done()]
        for call in calls:
            call.cancel(reason)
        return all(call._done.wait(timeout) for call in calls)

    def new_task(self, output_dir: str = "") -> str:
        """Ask the toolkit node for a fresh record (no finish result yet); returns its output directory."""
        if not self._new_task.wait_for_service(timeout_sec=self.timeout_s):
            raise RemoteError(f"{self.namespace}/new_task is not available")
        response = _wait(self._new_task.call_async(NewTask.Request(output_dir=output_dir)), 120, f"{self.namespace}/new_task")
        if not response.ok:
            raise RemoteError(f"{self.namespace}/new_task: {response.error}")
        return response.output_dir

    def close_task(self, recipe_tag: str = "") -> dict[str, str]:
        """Close the node's current record (recipe under `recipe_tag` when given); the node opens a fresh one.

        Returns output_dir, episode, recipe (empty strings for what was not written) and error.
        """
        if not self._close_task.wait_for_service(timeout_sec=self.timeout_s):
            raise RemoteError(f"{self.namespace}/close_task is not available")
        response = _wait(self._close_task.call_async(CloseTask.Request(recipe_tag=recipe_tag)), 120,
                         f"{self.namespace}/close_task")
        if not response.ok and not response.output_dir:
            raise RemoteError(f"{self.namespace}/close_task: {response.error}")
        return {"output_dir": response.output_dir, "episode": response.episode, "recipe": response.recipe,
                "error": response.error}

    def resume_calls(self) -> None:
        """Admission is the node's business; nothing to reopen on the client side."""

    def _status_payload(self) -> dict[str, Any]:
        response = _wait(self._status.call_async(GetStatus.Request()), self.timeout_s, f"{self.namespace}/status")
        return json.loads(response.status_json)

    @property
    def finish_result(self) -> dict[str, Any] | None:
        return self._status_payload().get("finish_result")

    def solved(self) -> bool | None:
        solved = self._status_payload().get("solved")
        return solved if isinstance(solved, bool) else None
