"""The CallTool goals of a toolkit node: an action server per tool and one for any tool, each goal's
call in the toolkit's scheduler, its cancel, its feedback and its final status (rpent_ros/toolkit/goal_status.py).

No executor thread waits for a call. A goal is submitted to the toolkit the moment it is accepted, and
goal requests are accepted one at a time in the order they arrived, so the toolkit's queue order is the
order a client sent them in; its result is sent from the call's done callback, when there is nothing
left to wait for. Queued and running goals hold only their entry here, so cancels, services and new
goals are always served. On the status topic a goal is ACCEPTED
while its call waits in the queue and EXECUTING from the moment the call runs until it ends
(rpent_ros/toolkit/goal_handles.py), as every stock client (rclpy, `ros2 action send_goal` and its Ctrl-C,
rviz) expects; its feedback stage says the same in words.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from functools import partial
from typing import Any

from geometry_msgs.msg import PoseStamped
from rclpy.action import ActionServer, CancelResponse, GoalResponse
from rclpy.action.server import ServerGoalHandle
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
from rclpy.node import Node
from sensor_msgs.msg import CompressedImage

from rpent.action import CallTool
from rpent.record.values import describe_exception
from rpent.tools import ToolCall, ToolResult
from rpent_ros.toolkit import goal_handles
from rpent_ros.toolkit.conversions import GoalError, feedback_fields, parse_goal, result_fields
from rpent_ros.toolkit.goal_qos import MAX_GOALS, call_tool_server_qos
from rpent_ros.toolkit.goal_status import ABORTED, CANCELED, SUCCEEDED, done_message, goal_outcome

log = logging.getLogger(__name__)

CANCEL_REASON = "ROS cancel request"
FEEDBACK_HZ = 5.0  # while a call runs: ros2cli acts on Ctrl-C only when a message arrives (ros2/ros2cli#1063)
# A goal's feedback follows its last status message by at least this long: rclpy's ActionClient
# handles a feedback message before a status message taken in the same round, so feedback sent right
# after EXECUTING would reach the client's callback while its goal handle still says ACCEPTED.
STATUS_LEAD_S = 0.05
# A goal still unfinished this long after its acceptance has its status sent (once, with the next tick):
# rclpy publishes none at acceptance, so a queued goal would read UNKNOWN to its client (and ros2
# send_goal's Ctrl-C would cancel nothing) until some goal's state changed; and a client drops a status
# message that arrives before it handled the goal's response (several goals sent at once). Waiting
# this long first spares the calls that end at once (most reads) a status message of their own: each
# lists every goal the server keeps (goal_qos.RESULT_KEEP_S), so it is not free.
ANNOUNCE_AFTER_S = STATUS_LEAD_S
# Then the status list of a server with unfinished goals goes out again every STATUS_AGAIN_S: rclpy's
# ActionClient drops a status message that arrives before it handled the goal's response (ros2/rclcpp#2782,
# rclpy alike), and none comes again until some goal's state changes. A client slower than
# ANNOUNCE_AFTER_S (a loaded machine) would read UNKNOWN for a whole motion, and ros2 send_goal's Ctrl-C
# would do nothing (a CI run saw it). One message per server, whatever the number of goals.
STATUS_AGAIN_S = 0.5
TICK_HZ = 20.0  # sends what waited for STATUS_LEAD_S; running goals repeat their feedback at FEEDBACK_HZ
# A queued goal says "queued" again QUEUED_AGAIN_S later if it still waits: a client drops feedback that
# comes before it handled the goal's response (several goals sent at once, a loaded machine), and the
# first "queued" goes out 50 ms after acceptance; on a loaded machine the client's feedback subscription
# may match only later (a CI run lost the first two). Four times at most (0.05 to 1.55 s), so a deep queue
# costs little feedback.
QUEUED_SAYS = 4
QUEUED_AGAIN_S = 0.5
# A cancel answered ACCEPT moves the goal to CANCELING just after the cancel callback returns; a call
# that ended inside that callback (a queued call is dropped at once) waits for that, never longer.
_SETTLE_S = 5.0
_APPLYING = "applying"


class _NextTurn:
    """Awaited by an execute callback: hands the thread back until the executor's next round."""

    def __await__(self) -> Any:
        yield


class _Goal:
    """One accepted goal. `lock` guards what the toolkit's threads and the executor's share."""

    __slots__ = ("accepted_at", "call", "cancel", "cancel_reached", "confirmed", "handle", "lock", "message",
                 "pending", "progress", "queued_sent", "result", "running_said", "running_since", "sent_at", "stage",
                 "started", "status_at")

    def __init__(self, handle: ServerGoalHandle) -> None:
        self.handle = handle
        self.lock = threading.Lock()
        self.call: ToolCall | None = None  # None until toolkit.submit() returned
        self.result: ToolResult | None = None  # set once: the goal is then executed
        # The answer to a ROS cancel: None (none asked), _APPLYING, or the CancelResponse given.
        self.cancel: Any = None
        self.cancel_reached = False  # the cancel reached the call before it ended
        self.stage, self.message, self.progress = "accepted", "", None
        self.queued_sent = 0  # "queued" feedback sent: with a tick if the call still waits then, and once more
        self.running_since: float | None = None
        self.running_said = False  # a "running" feedback went out (see _publish)
        self.started = False  # EXECUTING on the status topic (its call ran)
        self.accepted_at = self.status_at = time.monotonic()  # status_at: when its status last went out
        self.confirmed = False  # its status went out ANNOUNCE_AFTER_S after acceptance
        self.pending = False  # a stage change waits to be sent (see STATUS_LEAD_S)
        self.sent_at = 0.0  # when its last feedback went out

    def may_send(self, now: float) -> bool:
        """Feedback may go out now: its client has had the goal's status for STATUS_LEAD_S."""
        return self.confirmed and now - self.status_at >= STATUS_LEAD_S


class ToolkitGoals:
    """Serves `~/call_tool` and `~/tools/<tool>` of `node` against `toolkit()` (the node's current toolkit).

    At most `max_goals` unfinished goals are held; more are refused (and the action QoS keeps at least
    that many requests, so a burst up to it is never lost). `poses()` gives each arm's pose for the
    periodic feedback of running calls.
    """

    def __init__(self, node: Node, toolkit: Callable[[], Any], tool_names: list[str], *, max_goals: int = MAX_GOALS,
                 poses: Callable[[], list[PoseStamped]] | None = None) -> None:
        self.node = node
        self._toolkit = toolkit
        self.max_goals = max_goals
        self._poses = poses
        self._goals: dict[bytes, _Goal] = {}
        self._holding = 0  # goals accepted and not yet finished
        self._lock = threading.Lock()
        # One goal, cancel or result request handled at a time, in the order they were taken: rclpy hands
        # each request to an executor thread of its own, and in a reentrant group the thread of a goal sent
        # second could submit its call first (a CI run: two move_to goals sent back to back ran in reverse).
        # Nothing here waits: a call runs in the toolkit's scheduler and `_execute`, an executor task
        # outside any group, only awaits its result; a cancel waits for the toolkit's stop hooks alone.
        group = MutuallyExclusiveCallbackGroup()
        # Room for a burst past max_goals too: goals beyond it must arrive to be refused.
        qos = call_tool_server_qos(max(max_goals, MAX_GOALS))
        self.servers = [self._server("~/call_tool", None, group, qos)]
        self.servers += [self._server(f"~/tools/{name}", name, group, qos) for name in tool_names]
        # A group of its own: a slow pose reading (arms in runtime nodes) delays only the next tick.
        self._ticker = node.create_timer(1.0 / TICK_HZ, self._tick, callback_group=MutuallyExclusiveCallbackGroup())
        self._pose_failed = False

    def _server(self, name: str, served: str | None, group: MutuallyExclusiveCallbackGroup, qos: dict[str, Any]) -> ActionServer:
        return ActionServer(
            self.node, CallTool, name,
            execute_callback=self._execute,
            goal_callback=self._admit,
            handle_accepted_callback=partial(self._accepted, served),
            cancel_callback=self._cancel,
            callback_group=group,
            **qos,
        )

    # ---- goal life cycle ---------------------------------------------------------------------

    def _admit(self, _request: Any) -> GoalResponse:
        with self._lock:
            if self._holding >= self.max_goals:
                refused = True
            else:
                # Counted from here: rclpy then accepts the goal and calls _accepted (if rcl fails to
                # create its handle in between, which it does only when out of memory, one place is lost).
                self._holding += 1
                refused = False
        if refused:
            self.node.get_logger().warning(
                f"goal refused: {self.max_goals} goals are unfinished (parameter max_goals)", throttle_duration_sec=5.0)
            return GoalResponse.REJECT
        return GoalResponse.ACCEPT

    def _accepted(self, served: str | None, handle: ServerGoalHandle) -> None:
        goal = _Goal(handle)
        with self._lock:  # registered before the call exists: a call refused in submit() ends its goal at once
            self._goals[bytes(handle.goal_id.uuid)] = goal
        try:
            parsed = parse_goal(handle.request.tool, handle.request.arguments_json, served_tool=served)
            call = self._toolkit().submit(parsed.tool, parsed.arguments, on_stage=partial(self._on_stage, goal))
        except GoalError as exc:
            self._finish(goal, ToolResult(error=str(exc)))
            return
        except Exception as exc:  # submit never raises by contract; a thread that cannot start still ends the goal
            log.exception("goal for %r could not be submitted", handle.request.tool)
            self._finish(goal, ToolResult(error=f"internal error: {describe_exception(exc)}"))
            return
        with goal.lock:  # no cancel of it can have come yet: cancels wait for this callback (see the group)
            goal.call = call
        if call.done():  # finished before it was attached (refused)
            self._finish(goal, call.result())

    def _on_stage(self, goal: _Goal, stage: str, message: str, progress: float | None) -> None:
        if stage == "done":
            with goal.lock:
                call = goal.call
            if call is not None:  # else _accepted finishes the goal once it holds the call
                self._finish(goal, call.result())
            return
        with goal.lock:
            now = time.monotonic()
            if stage == "running" and goal.running_since is None:
                goal.running_since = now
                if goal_handles.start(goal.handle):
                    goal.started, goal.status_at = True, now
            goal.stage, goal.message, goal.progress = stage, message, progress
            # "queued" waits for a tick: a call admitted at once (most reads) never says it. Other stages
            # go out at once, or with the first tick that may send them.
            if stage != "queued":
                if goal.may_send(now):
                    self._publish(goal, [], now)
                else:
                    goal.pending = True

    def _finish(self, goal: _Goal, result: ToolResult) -> None:
        with goal.lock:
            if goal.result is not None:
                return
            goal.result = result
            started = goal.started
        goal_handles.deliver(goal.handle, started)  # from whichever thread ended the call; _execute runs at once

    async def _execute(self, handle: ServerGoalHandle) -> CallTool.Result:
        key = bytes(handle.goal_id.uuid)
        with self._lock:
            goal = self._goals[key]
        deadline = time.monotonic() + _SETTLE_S
        while not self._settled(goal) and time.monotonic() < deadline:
            await _NextTurn()
        with goal.lock:
            result = goal.result
            cancelled = goal.cancel is CancelResponse.ACCEPT and goal.cancel_reached
        assert result is not None
        outcome = goal_outcome(is_error=result.is_error, cancel_reached_call=cancelled)
        if outcome == CANCELED and not handle.is_cancel_requested:
            outcome = ABORTED  # ROS has no CANCELED without CANCELING first (never seen: see _SETTLE_S)
        with goal.lock:
            goal.stage, goal.message = "done", done_message(outcome, result.error)
            self._publish(goal, [], time.monotonic())
        fields = result_fields(result)
        message = CallTool.Result(
            is_error=fields["is_error"], error=fields["error"], result_json=fields["result_json"],
            images=[CompressedImage(format=fmt, data=data) for fmt, data in fields["images"]],
        )
        with self._lock:
            del self._goals[key]
            self._holding -= 1
        # The end state last, then straight back to rclpy, which files the result: a goal older than
        # RESULT_KEEP_S expires the moment it ends (see goal_qos), and only that gap lets it win.
        {SUCCEEDED: handle.succeed, ABORTED: handle.abort, CANCELED: handle.canceled}[outcome]()
        return message

    @staticmethod
    def _settled(goal: _Goal) -> bool:
        with goal.lock:
            answer = goal.cancel
        return answer is not _APPLYING and (answer is not CancelResponse.ACCEPT or goal.handle.is_cancel_requested)

    # ---- cancel ------------------------------------------------------------------------------

    def _cancel(self, handle: ServerGoalHandle) -> CancelResponse:
        """Accept exactly the cancels that reach the call; waits for nothing but the toolkit."""
        with self._lock:
            goal = self._goals.get(bytes(handle.goal_id.uuid))
        if goal is None:
            return CancelResponse.REJECT
        with goal.lock:
            # Over already, or a cancel of it is being answered. (Its call exists: `_accepted` ran to its end
            # before this callback could start, in the servers' one group.)
            if goal.result is not None or goal.cancel is not None or goal.call is None:
                return CancelResponse.REJECT
            goal.cancel, call = _APPLYING, goal.call
        reached = call.cancel(CANCEL_REASON)  # a queued call is dropped, a running one stopped
        answer = CancelResponse.ACCEPT if reached else CancelResponse.REJECT
        with goal.lock:
            goal.cancel, goal.cancel_reached = answer, reached
        return answer

    # ---- feedback ----------------------------------------------------------------------------

    def _publish(self, goal: _Goal, poses: list[PoseStamped], now: float) -> None:
        """Send the goal's current stage (call with goal.lock held, so a later stage never overtakes it)."""
        elapsed = now - goal.running_since if goal.running_since is not None else 0.0
        if goal.running_since is not None and not goal.running_said and goal.stage not in ("running", "done"):
            # A tool's own first stage ("moving", "awaiting_approval") can replace "running" within
            # STATUS_LEAD_S, before any feedback may go out; the client still hears that the call ran
            # first, as an in-process listener does. A call that ends that quickly sends only "done".
            goal.handle.publish_feedback(CallTool.Feedback(
                **feedback_fields("running", "", None), elapsed_s=elapsed, poses=poses))
        if goal.running_since is not None:
            goal.running_said = True
        goal.handle.publish_feedback(CallTool.Feedback(
            **feedback_fields(goal.stage, goal.message, goal.progress), elapsed_s=elapsed, poses=poses))
        goal.sent_at, goal.pending = now, False

    def _tick(self) -> None:
        """Send the status of goals accepted ANNOUNCE_AFTER_S ago (and again every STATUS_AGAIN_S), then the
        stage changes that had to wait,
        the feedback of every running call at FEEDBACK_HZ, and "queued" for calls still waiting (QUEUED_SAYS)."""
        now = time.monotonic()
        with self._lock:
            goals = [g for g in self._goals.values() if g.result is None]
        self._announce(goals, now)
        repeat = 1.0 / FEEDBACK_HZ
        due = [g for g in goals if g.may_send(now) and (
            (g.running_since is not None and (g.pending or now - g.sent_at >= repeat))
            or (g.stage == "queued" and g.queued_sent < QUEUED_SAYS
                and (g.queued_sent == 0 or now - g.sent_at >= QUEUED_AGAIN_S)))]
        if not due:
            return
        poses = self._read_poses() if any(g.running_since is not None for g in due) else []
        for goal in due:
            with goal.lock:
                if goal.result is not None:  # its "done" feedback is sent with its status
                    continue
                if goal.running_since is not None:
                    self._publish(goal, poses, now)
                elif goal.stage == "queued":
                    self._publish(goal, [], now)
                    goal.queued_sent += 1

    @staticmethod
    def _announce(goals: list[_Goal], now: float) -> None:
        """The status list of each server that has one of the unfinished `goals` due, one message per server:
        a goal is due ANNOUNCE_AFTER_S after its acceptance, then STATUS_AGAIN_S after its status last went out.
        Every goal of such a server is in its message, so each counts as announced now."""
        def due(goal: _Goal) -> bool:
            return now - (goal.status_at if goal.confirmed else goal.accepted_at) >= (
                STATUS_AGAIN_S if goal.confirmed else ANNOUNCE_AFTER_S)

        servers = {goal_handles.server_key(goal.handle) for goal in goals if due(goal)}
        if not servers:
            return
        listed = [goal for goal in goals if goal_handles.server_key(goal.handle) in servers]
        goal_handles.announce_each_server([goal.handle for goal in listed])
        for goal in listed:
            with goal.lock:
                goal.confirmed, goal.status_at = True, now

    def _read_poses(self) -> list[PoseStamped]:
        if self._poses is None:
            return []
        try:
            poses = self._poses()
        except Exception as exc:  # feedback goes on without poses; said once
            if not self._pose_failed:
                self._pose_failed = True
                log.warning("goal feedback: arm poses unavailable: %s", describe_exception(exc))
            return []
        self._pose_failed = False
        return poses
