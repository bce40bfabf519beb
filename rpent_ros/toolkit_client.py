"""RosToolkit: the Toolkit API over a remote toolkit_node's actions, so planners and the MCP bridge
run unchanged against a robot that lives in another process or on another machine.

Arguments are checked here against each tool's published schema, as strictly as the node checks them
(rpent_ros/tool_schema.py), so a refusal comes back before anything is sent. Every wait has a bound:
a goal the node does not answer within `timeout_s` ends with that error (and is cancelled should the
answer come later), and a call whose node goes away ends at once; a motion itself may run as long
as it runs.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from action_msgs.msg import GoalStatus
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
from rclpy.node import Node

from rpent.action import CallTool
from rpent.srv import CloseTask, GetStatus, ListTools, NewTask
from rpent.tools import ToolArgumentError, ToolResult
from rpent_ros.action_client import ThreadSafeActionClient
from rpent_ros.conversions import result_from_fields
from rpent_ros.goal_qos import RESULT_GRACE_S, call_tool_client_qos
from rpent_ros.tool_schema import ArgumentChecker

StageCallback = Callable[[str, str, "float | None"], Any]

_WATCH_PERIOD_S = 0.25
_GONE_AFTER_S = 1.0  # DDS graph updates lag a little; a node back within this is not "gone"
_TERMINAL = (GoalStatus.STATUS_SUCCEEDED, GoalStatus.STATUS_CANCELED, GoalStatus.STATUS_ABORTED)


class RemoteError(RuntimeError):
    pass


@dataclass(frozen=True)
class RemoteTool:
    """What planners read of a tool, and the same strict check of its arguments as the node's."""

    name: str
    description: str
    input_schema: dict[str, Any]
    readonly: bool
    _checker: ArgumentChecker | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_checker", ArgumentChecker(self.name, self.input_schema))

    def validate(self, arguments: Any) -> dict[str, Any]:
        """The arguments as a JSON object; ToolArgumentError (naming field and rule) where the node would refuse them."""
        assert self._checker is not None
        return self._checker.check(arguments)

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
    """A handle like rpent.tools.ToolCall: result(), cancel(), done(), stage.

    `status` is the goal's action_msgs/GoalStatus once it ended (None if no goal was sent: refused
    here); `feedback` the last CallTool feedback (elapsed_s, arm poses).
    """

    def __init__(self, client: RosToolkit, name: str, on_stage: StageCallback | None) -> None:
        self.name = name
        self.stage = "sending"
        self.status: int | None = None
        self.feedback: Any = None
        self._client = client
        self._on_stage = on_stage
        self._done = threading.Event()
        self._result: ToolResult | None = None
        self._goal_handle: Any = None
        self._cancel_requested = False
        self._sent_at = time.monotonic()
        self._ended_seen_at: float | None = None  # when the status topic first said the goal ended
        self._lock = threading.Lock()

    def _send(self, arguments_json: str) -> None:
        goal = CallTool.Goal(tool=self.name, arguments_json=arguments_json)
        future = self._client._action.send_goal_async(goal, feedback_callback=self._feedback)
        future.add_done_callback(self._goal_response)

    def _set_stage(self, stage: str, message: str = "", progress: float | None = None) -> None:
        self.stage = stage
        if self._on_stage is not None:
            self._on_stage(stage, message, progress)

    def _feedback(self, feedback_msg: Any) -> None:
        fb = feedback_msg.feedback
        previous, self.feedback = self.feedback, fb
        if fb.stage == "done":  # reported once the result is here
            return
        # Running calls repeat their feedback five times a second; listeners hear of changes only.
        if previous is None or (fb.stage, fb.message, fb.progress) != (previous.stage, previous.message, previous.progress):
            self._set_stage(fb.stage, fb.message, fb.progress if fb.progress >= 0 else None)

    def _goal_response(self, future: Any) -> None:
        handle = future.result()
        with self._lock:
            abandoned = self._done.is_set()  # gave up waiting for this answer
            if handle.accepted and not abandoned:
                self._goal_handle = handle
            cancel = self._cancel_requested
        if not handle.accepted:
            self._finish(ToolResult(error=(
                f"{self._client.namespace}: the goal for '{self.name}' was refused: the toolkit node holds as many"
                " unfinished goals as its parameter max_goals allows")))
            return
        if abandoned or cancel:
            handle.cancel_goal_async()  # nobody waits for it any more: it must not run on its own
        if not abandoned:
            handle.get_result_async().add_done_callback(self._got_result)

    def _got_result(self, future: Any) -> None:
        response = future.result()
        if response.status not in _TERMINAL:  # STATUS_UNKNOWN
            self._finish(ToolResult(error=(
                f"{self._client.namespace}/call_tool: the toolkit node no longer knows the goal for '{self.name}'"
                " (it restarted, or the result expired before it was asked for)")))
            return
        self.status = response.status
        r = response.result
        self._finish(result_from_fields(r.is_error, r.error, r.result_json, [(i.format, bytes(i.data)) for i in r.images]))

    def _watch(self, now: float, server_gone_for: float) -> None:
        """Called a few times a second while the call is open: give every wait its bound."""
        with self._lock:
            handle = self._goal_handle
        ns, timeout = self._client.namespace, self._client.timeout_s
        if handle is None:
            if now - self._sent_at > timeout:
                self._finish(ToolResult(error=(
                    f"{ns}/call_tool: no answer to the goal for '{self.name}' within {timeout} s"
                    " (is the toolkit node running?)")))
        elif server_gone_for > _GONE_AFTER_S:
            self._finish(ToolResult(error=f"{ns}/call_tool: the toolkit node went away during '{self.name}'"))
        elif handle.status in _TERMINAL:
            # The goal ended (says the status topic) but its result has not come: ask again after a grace
            # (the node keeps a result RESULT_KEEP_S).
            with self._lock:
                if self._ended_seen_at is None:
                    self._ended_seen_at = now
                again = now - self._ended_seen_at > RESULT_GRACE_S
                if again:
                    self._ended_seen_at = now
            if again:
                handle.get_result_async().add_done_callback(self._got_result)

    def _finish(self, result: ToolResult) -> None:
        with self._lock:
            if self._done.is_set():
                return
            self._result = result
            self._done.set()
        self._client._forget(self)
        self._set_stage("done")

    def done(self) -> bool:
        return self._done.is_set()

    def wait(self, timeout: float | None = None) -> bool:
        """Wait until the call has ended; False if it had not within `timeout` seconds."""
        return self._done.wait(timeout)

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
        self._action = ThreadSafeActionClient(node, CallTool, f"{self.namespace}/call_tool", **call_tool_client_qos())
        self._list = node.create_client(ListTools, f"{self.namespace}/list_tools")
        self._status = node.create_client(GetStatus, f"{self.namespace}/status")
        self._new_task = node.create_client(NewTask, f"{self.namespace}/new_task")
        self._close_task = node.create_client(CloseTask, f"{self.namespace}/close_task")
        self._active: set[RemoteCall] = set()
        self._lock = threading.Lock()
        self._tools: list[RemoteTool] | None = None
        self._gone_since: float | None = None
        node.create_timer(_WATCH_PERIOD_S, self._watch, callback_group=MutuallyExclusiveCallbackGroup())

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
        """Send the goal, or end the call at once with the refusal the node would give. Never raises."""
        call = RemoteCall(self, name, on_stage)
        try:
            arguments_json = json.dumps(self._checked(name, arguments))
        except (RemoteError, ToolArgumentError) as exc:
            call._finish(ToolResult(error=str(exc)))
            return call
        with self._lock:
            self._active.add(call)
        call._send(arguments_json)
        return call

    def _checked(self, name: str, arguments: Any) -> dict[str, Any]:
        tools = self.list_tools()
        tool = next((t for t in tools if t.name == name), None)
        if tool is None:
            raise ToolArgumentError(f"unknown tool '{name}' (available: {', '.join(t.name for t in tools)})")
        return tool.validate(arguments)

    def _forget(self, call: RemoteCall) -> None:
        with self._lock:
            self._active.discard(call)

    def _watch(self) -> None:
        with self._lock:
            calls = list(self._active)
        if not calls:
            self._gone_since = None
            return
        now = time.monotonic()
        if self._action.server_is_ready():
            self._gone_since = None
        elif self._gone_since is None:
            self._gone_since = now
        gone_for = 0.0 if self._gone_since is None else now - self._gone_since
        for call in calls:
            call._watch(now, gone_for)

    def execute_tool(self, name: str, arguments: Any = None) -> ToolResult:
        return self.submit(name, arguments).result()

    def cancel_active_and_wait(self, timeout: float | None = None, reason: str = "cancelled") -> bool:
        with self._lock:
            calls = list(self._active)
        for call in calls:
            call.cancel(reason)
        return all(call.wait(timeout) for call in calls)

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
