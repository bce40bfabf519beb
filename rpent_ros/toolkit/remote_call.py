"""RemoteCall: one call a RosToolkit sent to a toolkit_node, as a CallTool goal, from sending to its
result; every wait it does has a bound (see rpent_ros/toolkit/client.py).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from action_msgs.msg import GoalStatus

from rpent.action import CallTool
from rpent.tools import ToolResult
from rpent.tools.api import StageCallback
from rpent_ros.action_client import ThreadSafeActionClient
from rpent_ros.toolkit.conversions import result_from_fields
from rpent_ros.toolkit.goal_qos import RESULT_GRACE_S

_GONE_AFTER_S = 1.0  # DDS graph updates lag a little; a node back within this is not "gone"
_TERMINAL = (GoalStatus.STATUS_SUCCEEDED, GoalStatus.STATUS_CANCELED, GoalStatus.STATUS_ABORTED)


class RemoteCall:
    """A handle like rpent.tools.ToolCall (rpent.tools.api.CallHandle): id, result(), cancel(), done(), stage.

    `status` is the goal's action_msgs/GoalStatus once it ended (None if no goal was sent: refused
    here); `feedback` the last CallTool feedback (elapsed_s, arm poses). `namespace` and `timeout_s`
    are its client's (RosToolkit); `on_settled` is told once the call has ended.
    """

    def __init__(self, call_id: int, name: str, on_stage: StageCallback | None, *, namespace: str, timeout_s: float,
                 on_settled: Callable[[RemoteCall], None] | None = None) -> None:
        self.id = call_id
        self.name = name
        self.stage = "sending"
        self.status: int | None = None
        self.feedback: Any = None
        self._namespace = namespace
        self._timeout_s = timeout_s
        self._on_settled = on_settled
        self._on_stage = on_stage
        self._done = threading.Event()
        self._answered = threading.Event()  # the node accepted or refused the goal, or the call ended
        self._result: ToolResult | None = None
        self._goal_handle: Any = None
        self._cancel_requested = False
        self._sent_at = time.monotonic()
        self._ended_seen_at: float | None = None  # when the status topic first said the goal ended
        self._lock = threading.Lock()

    def send(self, action: ThreadSafeActionClient, arguments_json: str) -> None:
        goal = CallTool.Goal(tool=self.name, arguments_json=arguments_json)
        future = action.send_goal_async(goal, feedback_callback=self._feedback)
        future.add_done_callback(self._goal_response)

    def _set_stage(self, stage: str, message: str = "", progress: float | None = None) -> None:
        self.stage = stage
        if self._on_stage is not None:
            self._on_stage(stage, message, progress)

    def _feedback(self, feedback_msg: Any) -> None:
        fb = feedback_msg.feedback
        previous, self.feedback = self.feedback, fb
        if fb.stage == "done" or self._done.is_set():  # "done" is reported once the result is here
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
        self._answered.set()
        if not handle.accepted:
            self.settle(ToolResult(error=(
                f"{self._namespace}: the goal for '{self.name}' was refused: the toolkit node holds as many"
                " unfinished goals as its parameter max_goals allows")))
            return
        if abandoned or cancel:
            handle.cancel_goal_async()  # nobody waits for it any more: it must not run on its own
        if not abandoned:
            handle.get_result_async().add_done_callback(self._got_result)

    def _got_result(self, future: Any) -> None:
        response = future.result()
        if response.status not in _TERMINAL:  # STATUS_UNKNOWN
            self.settle(ToolResult(error=(
                f"{self._namespace}/call_tool: the toolkit node no longer knows the goal for '{self.name}'"
                " (it restarted, or the result expired before it was asked for)")))
            return
        self.status = response.status
        r = response.result
        self.settle(result_from_fields(r.is_error, r.error, r.result_json, [(i.format, bytes(i.data)) for i in r.images]))

    def watch(self, now: float, server_gone_for: float) -> None:
        """Called a few times a second while the call is open: give every wait its bound."""
        with self._lock:
            handle = self._goal_handle
        ns, timeout = self._namespace, self._timeout_s
        if handle is None:
            if now - self._sent_at > timeout:
                self.settle(ToolResult(error=(
                    f"{ns}/call_tool: no answer to the goal for '{self.name}' within {timeout} s"
                    " (is the toolkit node running?)")))
        elif server_gone_for > _GONE_AFTER_S:
            self.settle(ToolResult(error=f"{ns}/call_tool: the toolkit node went away during '{self.name}'"))
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

    def settle(self, result: ToolResult) -> None:
        """The call has ended with `result` (the first of several endings wins); then "done" is reported."""
        with self._lock:
            if self._done.is_set():
                return
            self._result = result
            self.stage = "done"
            self._done.set()
            self._answered.set()
        if self._on_settled is not None:
            self._on_settled(self)
        self._set_stage("done")

    def done(self) -> bool:
        return self._done.is_set()

    def wait_answered(self, timeout: float) -> bool:
        """Wait until the node has accepted or refused the goal (or the call ended); False after `timeout`."""
        return self._answered.wait(timeout)

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


def all_ended(calls: list[RemoteCall], timeout: float | None) -> bool:
    """Wait for every call to end, all within `timeout` seconds; False if some had not."""
    deadline = None if timeout is None else time.monotonic() + timeout
    return all(call.wait(None if deadline is None else max(0.0, deadline - time.monotonic())) for call in calls)
