"""RosToolkit: the ToolkitAPI (rpent/tools/api.py) over a remote toolkit_node's actions, so planners and
the MCP bridge run unchanged against a robot that lives in another process or on another machine.

Arguments are checked here against each tool's published schema, as strictly as the node checks them
(rpent_ros/toolkit/tool_schema.py), so a refusal comes back before anything is sent. Every wait has a bound:
a goal the node does not answer within `timeout_s` ends with that error (and is cancelled should the
answer come later), and a call whose node goes away ends at once; a motion itself may run as long
as it runs.
"""

from __future__ import annotations

import itertools
import json
import logging
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
from rclpy.node import Node

from rpent.action import CallTool
from rpent.srv import CloseTask, GetStatus, ListTools, NewTask
from rpent.tools import ToolArgumentError, ToolResult
from rpent.tools.api import StageCallback
from rpent_ros.action_client import ThreadSafeActionClient
from rpent_ros.toolkit.goal_qos import call_tool_client_qos
from rpent_ros.toolkit.remote_call import RemoteCall, all_ended
from rpent_ros.toolkit.tool_schema import ArgumentChecker

log = logging.getLogger(__name__)

_WATCH_PERIOD_S = 0.25
# How long cancel_active_and_wait waits for the node to answer a goal just sent before it cancels it anyway.
ANSWER_WAIT_S = 5.0


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


class RosToolkit:
    """The ToolkitAPI against `<namespace>/call_tool`, `<namespace>/list_tools`, `<namespace>/status` and the
    record services `<namespace>/new_task` and `<namespace>/close_task`.

    A client among several of one node: cancel_active_and_wait cancels the calls this client sent (the
    node goes on admitting others'), close() ends this client, not the node's record (close_task does).
    The given node must be spun by an executor in another thread.
    """

    #: The toolkit node keeps the robot's memory.
    memory = None

    def __init__(self, node: Node, namespace: str = "/toolkit", timeout_s: float = 30.0) -> None:
        self.node = node
        self.namespace = namespace.rstrip("/")
        self.timeout_s = timeout_s
        #: The node's record for this client's task, once new_task named it (None before, and after close_task).
        self.output_dir: Path | None = None
        self._action = ThreadSafeActionClient(node, CallTool, f"{self.namespace}/call_tool", **call_tool_client_qos())
        self._list = node.create_client(ListTools, f"{self.namespace}/list_tools")
        self._status = node.create_client(GetStatus, f"{self.namespace}/status")
        self._new_task = node.create_client(NewTask, f"{self.namespace}/new_task")
        self._close_task = node.create_client(CloseTask, f"{self.namespace}/close_task")
        self._active: set[RemoteCall] = set()
        self._ids = itertools.count(1)
        self._closed = False
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
        try:
            arguments_json = json.dumps(self._checked(name, arguments))
        except (RemoteError, ToolArgumentError) as exc:
            return self.refused_call(name, str(exc), on_stage)
        call = RemoteCall(next(self._ids), name, on_stage, namespace=self.namespace, timeout_s=self.timeout_s,
                          on_settled=self._forget)
        with self._lock:
            closed = self._closed
            if not closed:
                self._active.add(call)
        if closed:
            call.settle(ToolResult(error=f"{self.namespace}: this client of the toolkit node is closed; '{name}' was not sent"))
        else:
            call.send(self._action, arguments_json)
        return call

    def refused_call(self, name: str, error: str, on_stage: StageCallback | None = None) -> RemoteCall:
        """A call that ended before anything was sent, with `error`."""
        call = RemoteCall(next(self._ids), name, on_stage, namespace=self.namespace, timeout_s=self.timeout_s)
        call.settle(ToolResult(error=error))
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
            call.watch(now, gone_for)

    def execute_tool(self, name: str, arguments: Any = None) -> ToolResult:
        return self.submit(name, arguments).result()

    def cancel(self, call_id: int, reason: str = "cancelled") -> bool:
        with self._lock:
            call = next((c for c in self._active if c.id == call_id), None)
        return call.cancel(reason) if call is not None else False

    def cancel_active_and_wait(self, timeout: float | None = None, reason: str = "cancelled by operator") -> bool:
        """Cancel the calls this client sent and wait for them to end (the node goes on admitting calls)."""
        with self._lock:
            calls = sorted(self._active, key=lambda c: c.id, reverse=True)
        # The latest first, each once the node has its goal, as the toolkit drops its queue before it cancels
        # what runs: were the running call's cancel to arrive first (or a queued goal's acceptance only after
        # it), its end would start the queued call before that one's cancel came.
        deadline = None if timeout is None else time.monotonic() + timeout

        def left(most: float | None) -> float | None:
            """What is left of the deadline, at most `most` (None: no bound)."""
            if deadline is None:
                return most
            remaining = max(0.0, deadline - time.monotonic())
            return remaining if most is None else min(most, remaining)

        for call in calls:
            call.wait_answered(left(ANSWER_WAIT_S))
        for call in calls:
            call.cancel(reason)
        return all_ended(calls, left(None))

    def close(self, timeout: float | None = None) -> Path | None:
        """Refuse this client's later calls and wait for the ones it sent. The node's record stays open (other
        clients may share it; close_task ends it): there is no episode to return here."""
        with self._lock:
            self._closed = True
            calls = list(self._active)
        if not all_ended(calls, timeout):
            log.warning("%s: calls still running when this client closed", self.namespace)
        return None

    @property
    def closed(self) -> bool:
        return self._closed

    def write_recipe(self, recipe_tag: str) -> Path:
        """Have the node write its current record's recipe, which also closes that record (~/close_task; the
        node opens a fresh one). The recipe's path on the node's machine."""
        return recipe_of(self.close_task(recipe_tag), self.namespace)

    def new_task(self, output_dir: str = "") -> str:
        """Ask the toolkit node for a fresh record (no finish result yet); returns its output directory."""
        if not self._new_task.wait_for_service(timeout_sec=self.timeout_s):
            raise RemoteError(f"{self.namespace}/new_task is not available")
        response = _wait(self._new_task.call_async(NewTask.Request(output_dir=output_dir)), 120, f"{self.namespace}/new_task")
        if not response.ok:
            raise RemoteError(f"{self.namespace}/new_task: {response.error}")
        self.output_dir = Path(response.output_dir)
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
        self.output_dir = None  # the node's next record is not this client's task
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

    def stop_record(self) -> dict[str, Any]:
        """The node's latched stop for result.json: its task's stops and releases, and the latch now."""
        status = self._status_payload()
        return {"stop_events": status.get("stop_events", []), "stop_latch": status.get("stop_latch")}


def recipe_of(closed: dict[str, str], namespace: str) -> Path:
    """The recipe a close_task answer names; RemoteError saying why where the node wrote none."""
    if not closed["recipe"]:
        raise RemoteError(f"{namespace}: the toolkit node wrote no recipe: {closed['error'] or 'unknown reason'}")
    return Path(closed["recipe"])
