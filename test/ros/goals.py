"""A CallTool client for the load tests that shows what RosToolkit hides: each goal's acceptance, the
answer to its cancel request, its final GoalStatus and every feedback message. Every wait is bounded.

Imported by tests that have already checked that rclpy and the rpent interfaces import.
"""

from __future__ import annotations

import json
import threading
import time
from typing import Any

from action_msgs.msg import GoalStatus
from action_msgs.srv import CancelGoal

from rpent.action import CallTool
from rpent_ros.action_client import ThreadSafeActionClient
from rpent_ros.toolkit.goal_qos import call_tool_client_qos

STATUS_NAMES = {
    GoalStatus.STATUS_SUCCEEDED: "SUCCEEDED",
    GoalStatus.STATUS_ABORTED: "ABORTED",
    GoalStatus.STATUS_CANCELED: "CANCELED",
    GoalStatus.STATUS_UNKNOWN: "UNKNOWN",
}


class Goal:
    """One goal as the client sees it."""

    def __init__(self, tool: str, arguments_json: str) -> None:
        self.tool = tool
        self.arguments_json = arguments_json
        self.sent_at = time.monotonic()
        self.answered = threading.Event()  # the goal response (accepted or not) arrived
        self.finished = threading.Event()  # the result arrived
        self.accepted: bool | None = None
        self.handle: Any = None
        self.status: int | None = None
        self.result: Any = None
        self.finished_at: float | None = None
        self.feedback: list[tuple[float, Any]] = []  # (monotonic arrival time, CallTool.Feedback)

    @property
    def status_name(self) -> str:
        return STATUS_NAMES.get(self.status, str(self.status))

    def wait_answered(self, timeout_s: float) -> bool:
        if not self.answered.wait(timeout_s):
            raise AssertionError(f"goal {self.tool} {self.arguments_json}: no goal response within {timeout_s} s")
        return bool(self.accepted)

    def wait_finished(self, timeout_s: float) -> Goal:
        if not self.finished.wait(timeout_s):
            raise AssertionError(f"goal {self.tool} {self.arguments_json}: no result within {timeout_s} s")
        return self


class GoalClient:
    def __init__(self, node: Any, action: str = "/toolkit/call_tool") -> None:
        self.node = node
        self.action = action
        self.client = ThreadSafeActionClient(node, CallTool, action, **call_tool_client_qos())

    def wait_for_server(self, timeout_s: float = 30.0) -> None:
        if not self.client.wait_for_server(timeout_sec=timeout_s):
            raise AssertionError(f"{self.action} did not appear within {timeout_s} s")

    def send(self, tool: str, arguments: Any = None, *, arguments_json: str | None = None) -> Goal:
        text = arguments_json if arguments_json is not None else json.dumps(arguments or {})
        goal = Goal(tool, text)

        def on_feedback(message: Any) -> None:
            goal.feedback.append((time.monotonic(), message.feedback))

        def on_result(future: Any) -> None:
            response = future.result()
            goal.status, goal.result = response.status, response.result
            goal.finished_at = time.monotonic()
            goal.finished.set()

        def on_response(future: Any) -> None:
            handle = future.result()
            goal.handle, goal.accepted = handle, handle.accepted
            goal.answered.set()
            if handle.accepted:
                handle.get_result_async().add_done_callback(on_result)
            else:
                goal.finished.set()

        future = self.client.send_goal_async(CallTool.Goal(tool=tool, arguments_json=text), feedback_callback=on_feedback)
        future.add_done_callback(on_response)
        return goal

    def cancel(self, goal: Goal, timeout_s: float = 5.0) -> int:
        """Ask to cancel `goal`; returns the answer's return_code once it arrives (ERROR_NONE: accepted)."""
        assert goal.handle is not None, "cancel only goals whose response arrived"
        answered = threading.Event()
        box: dict[str, Any] = {}

        def on_answer(future: Any) -> None:
            box["response"] = future.result()
            answered.set()

        goal.handle.cancel_goal_async().add_done_callback(on_answer)
        if not answered.wait(timeout_s):
            raise AssertionError(f"cancel of {goal.tool}: no answer within {timeout_s} s")
        response = box["response"]
        if response.return_code == CancelGoal.Response.ERROR_NONE:
            assert [bytes(g.goal_id.uuid) for g in response.goals_canceling] == [bytes(goal.handle.goal_id.uuid)]
        return response.return_code


def wait_until(condition: Any, timeout_s: float, what: str, poll_s: float = 0.002) -> float:
    """Poll `condition` until it holds; returns when (monotonic). Raises naming `what` after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    pause = threading.Event()
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout_s} s")
        pause.wait(poll_s)
    return time.monotonic()
