"""What the stock ROS tools see of a toolkit node's goals: the status topic tells the truth.

A goal is ACCEPTED while its call waits in the toolkit's queue and EXECUTING from the moment its call
runs until it ends, so rclpy's `ClientGoalHandle.status`, `ros2 topic echo .../_action/status` and
`ros2 action send_goal`'s Ctrl-C (which cancels only goals it sees ACCEPTED or EXECUTING) work as
they do against any action server. The clients here are rclpy's own ActionClient and the stock
`ros2` command, not RosToolkit.
"""

from __future__ import annotations

import json
import shutil
import threading
import time

import pytest

rclpy = pytest.importorskip("rclpy", reason="rclpy not importable: ROS 2 is not sourced")
pytest.importorskip("rpent.action", reason="rpent interfaces not generated: colcon build this package and source it")

from action_msgs.msg import GoalStatus, GoalStatusArray  # noqa: E402
from rclpy.action import ActionClient  # noqa: E402
from rclpy.executors import SingleThreadedExecutor  # noqa: E402
from rclpy.node import Node  # noqa: E402
from rclpy.parameter import Parameter  # noqa: E402
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy  # noqa: E402

from rpent.action import CallTool  # noqa: E402
from rpent.record.steps import read_steps  # noqa: E402
from rpent_ros.toolkit.toolkit_node import ToolkitNode  # noqa: E402

from .goals import wait_until  # noqa: E402
from .stock_cli import SendGoal  # noqa: E402

pytestmark = [pytest.mark.ros, pytest.mark.slow, pytest.mark.timeout(240)]
FAR = {"x_m": 0.55, "y_m": 0.55}  # 0.37 m from the toy gripper's start: seconds at speed 0.05
STATUS = {GoalStatus.STATUS_UNKNOWN: "UNKNOWN", GoalStatus.STATUS_ACCEPTED: "ACCEPTED",
          GoalStatus.STATUS_EXECUTING: "EXECUTING", GoalStatus.STATUS_CANCELING: "CANCELING",
          GoalStatus.STATUS_SUCCEEDED: "SUCCEEDED", GoalStatus.STATUS_CANCELED: "CANCELED",
          GoalStatus.STATUS_ABORTED: "ABORTED"}


def toy_toolkit(ros, tmp_path, speed):
    return ros(ToolkitNode(parameter_overrides=[
        Parameter("robot", value="toy"), Parameter("output_dir", value=str(tmp_path / "node")),
        Parameter("speed", value=speed)]))


class PlainClient:
    """rclpy's own ActionClient on its own single-threaded executor, as a user's script would write it.

    Goals are sent before the executor spins, so rclpy's send/filing race (FACTS.md) cannot bite.
    Each feedback is recorded with the status the goal handle held when the feedback arrived.
    """

    def __init__(self, action: str) -> None:
        self.node = Node("plain_status_client")
        self.client = ActionClient(self.node, CallTool, action)
        assert self.client.wait_for_server(timeout_sec=30), f"{action} did not appear"
        # wait_for_server sees the goal service only. Feedback is a volatile topic: what the server publishes
        # before this node has discovered its feedback publisher is lost to it (on a loaded machine that
        # took over 1.5 s: a queued goal's every 'queued' went by unseen), so wait for that publisher too.
        feedback = f"{action}/_action/feedback"
        wait_until(lambda: self.node.count_publishers(feedback) > 0, 30, f"the publisher of {feedback}")
        self.executor = SingleThreadedExecutor()
        self.executor.add_node(self.node)
        self.seen: dict[str, list[tuple[str, str]]] = {}  # label -> [(feedback stage, status then)]
        self.futures: dict[str, object] = {}

    def send(self, label: str, arguments: dict, tool: str = "move_to") -> None:
        seen = self.seen.setdefault(label, [])

        def on_feedback(message) -> None:
            future = self.futures[label]
            # The goal response is handled before feedback taken in the same round, so the handle exists.
            handle = future.result() if future.done() else None
            status = STATUS[handle.status] if handle is not None else "no handle yet"
            seen.append((message.feedback.stage, status))

        goal = CallTool.Goal(tool=tool, arguments_json=json.dumps(arguments))
        self.futures[label] = self.client.send_goal_async(goal, feedback_callback=on_feedback)

    def spin(self) -> threading.Thread:
        thread = threading.Thread(target=self.executor.spin, daemon=True)
        thread.start()
        return thread

    def handle(self, label: str, timeout_s: float = 30):
        future = self.futures[label]
        wait_until(future.done, timeout_s, f"goal response of {label}")
        return future.result()

    def result(self, label: str, timeout_s: float = 60):
        result_future = self.handle(label).get_result_async()
        wait_until(result_future.done, timeout_s, f"result of {label}")
        return result_future.result()

    def close(self) -> None:
        self.executor.shutdown()
        self.client.destroy()
        self.node.destroy_node()


def test_every_feedback_of_a_running_goal_sees_executing_and_a_queued_one_accepted(ros, tmp_path):
    # The first goal runs ~3.8 s: the queued one hears "queued" several times while it waits.
    toy_toolkit(ros, tmp_path, speed=0.1)
    statuses: list[dict[str, str]] = []
    listener = ros(Node("status_listener"))
    listener.create_subscription(
        GoalStatusArray, "/toolkit/call_tool/_action/status",
        lambda msg: statuses.append({bytes(s.goal_info.goal_id.uuid).hex(): STATUS[s.status] for s in msg.status_list}),
        # Every message the server sends (the status topic's own profile keeps only the latest).
        QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL))
    client = PlainClient("/toolkit/call_tool")
    try:
        # Feedback is volatile: the server's feedback publisher may match this client's subscription well after
        # the client sees it (two CI runs lost every "queued" of the second goal). A goal whose feedback has come
        # back shows the way is open.
        client.spin()
        client.send("warm-up", {}, tool="get_state")
        wait_until(lambda: client.seen["warm-up"], 60, "feedback of a first goal")
        client.send("first", FAR)
        client.send("second", {"x_m": 0.3, "y_m": 0.3})  # queued behind the first (both exclusive)
        first, second = client.result("first"), client.result("second")
        assert (STATUS[first.status], STATUS[second.status]) == ("SUCCEEDED", "SUCCEEDED")
        running = [status for stage, status in client.seen["first"] if stage not in ("queued", "done")]
        assert len(running) >= 3, client.seen["first"]  # ~3.8 s of motion at 5 Hz feedback
        assert set(running) == {"EXECUTING"}, client.seen["first"]
        queued = [status for stage, status in client.seen["second"] if stage == "queued"]
        # Said again 0.5 s later while it waits (the first may come before the client knows the goal, and is dropped).
        assert queued and set(queued) == {"ACCEPTED"}, client.seen["second"]
        later = [status for stage, status in client.seen["second"] if stage not in ("queued", "done")]
        assert later and set(later) == {"EXECUTING"}, client.seen["second"]
        # On the status topic (what `ros2 topic echo` and rviz read): the queued goal goes ACCEPTED,
        # EXECUTING, SUCCEEDED; the first one ran at once, and the server keeps one status message, so
        # its ACCEPTED may be replaced by EXECUTING before it is sent.
        expected = {"first": (["EXECUTING", "SUCCEEDED"], ["ACCEPTED", "EXECUTING", "SUCCEEDED"]),
                    "second": (["ACCEPTED", "EXECUTING", "SUCCEEDED"],)}
        for label, allowed in expected.items():
            key = bytes(client.handle(label).goal_id.uuid).hex()
            sequence = [s[key] for s in statuses if key in s]
            changes = [state for i, state in enumerate(sequence) if i == 0 or sequence[i - 1] != state]
            assert changes in [list(a) for a in allowed], (label, sequence)
    finally:
        client.close()


def test_exclusive_goals_sent_one_after_the_other_run_in_the_order_sent_when_the_first_is_accepted_late(ros, tmp_path):
    # A CI run: two move_to goals sent back to back, and the second ran first. rclpy hands each goal request to
    # an executor thread of its own; the first one's thread, starved of the CPU, submitted its call after the
    # second's. Here the first goal's submission takes 0.5 s, as that thread's did.
    node = toy_toolkit(ros, tmp_path, speed=0.5)
    second = {"x_m": 0.3, "y_m": 0.3}
    submit = node.toolkit.submit

    def starved(tool, arguments, **kwargs):
        if arguments == FAR:
            time.sleep(0.5)  # the thread that accepted the first goal gets no CPU for 0.5 s
        return submit(tool, arguments, **kwargs)

    node.toolkit.submit = starved
    client = PlainClient("/toolkit/call_tool")
    try:
        client.send("first", FAR)
        client.send("second", second)
        client.spin()
        results = client.result("first"), client.result("second")
        assert [STATUS[r.status] for r in results] == ["SUCCEEDED", "SUCCEEDED"]
        steps = [s for s in read_steps(tmp_path / "node" / "steps.jsonl") if s["tool"] == "move_to"]
        assert [(s["arguments"]["x_m"], s["arguments"]["y_m"]) for s in steps] == [(0.55, 0.55), (0.3, 0.3)]
    finally:
        client.close()


class LateClient(ActionClient):
    """rclpy's ActionClient that handles each goal response HOLD_S after taking it, as a client on a loaded
    machine may: the status messages that come meanwhile name a goal it does not know yet, and rclpy drops
    them (ros2/rclcpp#2782 for rclcpp; rclpy's ActionClient.execute does the same). Its goal handle then
    reads UNKNOWN until the server sends its status again, and `ros2 action send_goal`'s Ctrl-C, which
    cancels only goals it sees ACCEPTED or EXECUTING, does nothing."""

    HOLD_S = 0.3

    def __init__(self, node: Node, action: str) -> None:
        super().__init__(node, CallTool, action)
        self.held: list[tuple[float, object]] = []
        node.create_timer(0.02, self._release)

    async def execute(self, taken_data):
        if "goal" in taken_data:
            self.held.append((time.monotonic(), taken_data.pop("goal")))
        await super().execute(taken_data)

    async def _release(self) -> None:
        while self.held and time.monotonic() - self.held[0][0] >= self.HOLD_S:
            await super().execute({"goal": self.held.pop(0)[1]})


def test_a_client_that_handles_the_goal_response_late_still_learns_the_goal_executes(ros, tmp_path):
    toy_toolkit(ros, tmp_path, speed=0.05)
    node = Node("late_status_client")
    client = LateClient(node, "/toolkit/call_tool")
    executor = SingleThreadedExecutor()
    executor.add_node(node)
    try:
        assert client.wait_for_server(timeout_sec=30)
        future = client.send_goal_async(CallTool.Goal(tool="move_to", arguments_json=json.dumps(FAR)))
        threading.Thread(target=executor.spin, daemon=True).start()
        wait_until(future.done, 30, "the goal's response")
        handle = future.result()
        assert handle.accepted
        wait_until(lambda: handle.status == GoalStatus.STATUS_EXECUTING, 10, "the client reads EXECUTING")
        cancel = handle.cancel_goal_async()
        wait_until(cancel.done, 30, "the cancel's answer")
        result = handle.get_result_async()
        wait_until(result.done, 30, "the result")
        assert STATUS[result.result().status] == "CANCELED"
    finally:
        executor.shutdown()
        client.destroy()
        node.destroy_node()


@pytest.mark.skipif(shutil.which("ros2") is None, reason="the ros2 command is not on PATH")
def test_ctrl_c_on_the_stock_send_goal_cancels_the_running_motion_of_the_toy(ros, tmp_path):
    node = toy_toolkit(ros, tmp_path, speed=0.05)
    world = node.runtime_kwargs["world"]
    cli = SendGoal("/toolkit/call_tool", FAR, tool="move_to", cwd=tmp_path)
    try:
        cli.wait_for("stage: running", 60)
        start = list(world.gripper_xyz)
        wait_until(lambda: world.gripper_xyz != start, 10, "the toy arm moves")
        code = cli.ctrl_c()
        out = cli.output
        assert "Canceling goal..." in out and "Goal canceled." in out, out
        assert "Goal finished with status: CANCELED" in out, out
        assert code == 0, out
        assert world.stops == 1
        assert world.gripper_xyz[:2] != [FAR["x_m"], FAR["y_m"]]  # stopped short of the target
        steps = read_steps(tmp_path / "node" / "steps.jsonl")
        assert steps[-1]["tool"] == "move_to" and steps[-1]["cancelled"], steps[-1]
    finally:
        cli.kill()


@pytest.mark.skipif(shutil.which("ros2") is None, reason="the ros2 command is not on PATH")
def test_ctrl_c_on_the_stock_send_goal_drops_a_queued_goal(ros, tmp_path):
    node = toy_toolkit(ros, tmp_path, speed=0.05)
    world = node.runtime_kwargs["world"]
    # The motion through its own action, so the second client hears only its own goal's messages.
    first = SendGoal.of_tool("move_to", FAR, cwd=tmp_path)
    try:
        first.wait_for("stage: running", 60)
        second = SendGoal("/toolkit/call_tool", {"x_m": 0.1, "y_m": 0.1}, tool="move_to", cwd=tmp_path)
        try:
            second.wait_for("stage: queued", 60)
            # Ctrl-C as a person presses it, not while the client still handles the message it just
            # printed: ros2cli spins inside its signal handler, and while the interrupted callback holds
            # the node's (mutually exclusive) callback group that spin never reads the cancel's answer.
            at = list(world.gripper_xyz)
            wait_until(lambda: abs(world.gripper_xyz[0] - at[0]) > 0.01, 10, "the first motion goes on")
            code = second.ctrl_c()
            assert "Canceling goal..." in second.output and "Goal finished with status: CANCELED" in second.output, \
                second.output
            assert code == 0
        finally:
            second.kill()
        assert world.stops == 0  # the running motion went on
        first.wait_for("Goal finished with status: SUCCEEDED", 60)
        steps = read_steps(tmp_path / "node" / "steps.jsonl")
        assert [s["tool"] for s in steps] == ["move_to", "move_to"]
        assert "cancelled before it started" in steps[0]["error"]
        assert steps[1]["error"] is None
    finally:
        first.kill()
