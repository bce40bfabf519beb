"""toolkit_node under load, over DDS on loopback: cancels stay fast while a record is swapped and while
64 goals queue, a cancel is never accepted without being applied, goals are never lost (bursts and
streams from another process), clients never wait without a bound, feedback keeps coming during a
motion, and every goal ends with the status of the one documented rule (see rpent_ros/toolkit/goal_status.py).

Skipped where rclpy or the generated rpent interfaces cannot be imported.
"""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

rclpy = pytest.importorskip("rclpy", reason="rclpy not importable: ROS 2 is not sourced")
pytest.importorskip("rpent.action", reason="rpent interfaces not generated: colcon build this package and source it")

from action_msgs.srv import CancelGoal  # noqa: E402
from rclpy.node import Node  # noqa: E402
from rclpy.parameter import Parameter  # noqa: E402

from rpent.record.steps import read_steps  # noqa: E402
from rpent.srv import ListTools  # noqa: E402
from rpent_ros.toolkit.client import RosToolkit  # noqa: E402
from rpent_ros.toolkit.toolkit_node import ToolkitNode  # noqa: E402

from .goals import GoalClient, wait_until  # noqa: E402

pytestmark = [pytest.mark.ros, pytest.mark.slow, pytest.mark.timeout(240)]
HERE = Path(__file__).resolve().parent
FAR = {"x_m": 0.55, "y_m": 0.55}  # 0.37 m from the start: seconds at a slow speed
NEAR = {"x_m": 0.3, "y_m": 0.3, "z_m": 0.2}


def toolkit_node(ros, tmp_path, speed=0.5, **params):
    overrides = [Parameter("robot", value="toy"), Parameter("output_dir", value=str(tmp_path / "node")),
                 Parameter("speed", value=speed), *(Parameter(k, value=v) for k, v in params.items())]
    return ros(ToolkitNode(parameter_overrides=overrides))


def goal_client(ros, name="load_client"):
    client = GoalClient(ros(Node(name)))
    client.wait_for_server()
    return client


def moving(world, timeout_s=30):
    start = list(world.gripper_xyz)
    wait_until(lambda: world.gripper_xyz != start, timeout_s, "the arm starts moving")


def test_a_cancel_is_answered_while_a_new_task_waits_for_the_running_motion(ros, tmp_path):
    node = toolkit_node(ros, tmp_path, speed=0.02)
    goals = goal_client(ros)
    remote = RosToolkit(goals.node, "/toolkit")
    world = node.runtime_kwargs["world"]
    motion = goals.send("move_to", FAR)
    assert motion.wait_answered(10)
    moving(world)
    old = node.toolkit
    swapped: list[str] = []
    swap = threading.Thread(target=lambda: swapped.append(remote.new_task()), daemon=True)
    swap.start()
    wait_until(lambda: old.closed, 10, "new_task closes the record (and waits for the running motion)")
    sent = time.monotonic()
    assert goals.cancel(motion, timeout_s=5) == CancelGoal.Response.ERROR_NONE
    stopped = wait_until(lambda: world.stops == 1, 5, "the arm stops")
    assert stopped - sent < 0.5
    assert motion.wait_finished(10).status_name == "CANCELED"
    swap.join(30)
    assert swapped and Path(swapped[0]).name == "task-002"
    assert node.toolkit is not old and not node.toolkit.closed


def test_64_queued_goals_leave_cancels_services_and_new_goals_answered(ros, tmp_path):
    node = toolkit_node(ros, tmp_path, speed=0.05)
    goals = goal_client(ros)
    world = node.runtime_kwargs["world"]
    first = goals.send("move_to", FAR)
    assert first.wait_answered(10)
    moving(world)
    queued = [goals.send("move_to", NEAR) for _ in range(63)]
    for goal in queued:
        assert goal.wait_answered(30)
    # Behind the motion: 63 queued exclusive goals. A cancel, a service and a new goal still get answers.
    sent = time.monotonic()
    assert goals.cancel(first, timeout_s=2) == CancelGoal.Response.ERROR_NONE
    stopped = wait_until(lambda: world.stops == 1, 2, "the arm stops")
    assert stopped - sent < 0.1, f"the arm stopped {(stopped - sent) * 1e3:.0f} ms after the cancel was sent"
    tools = goals.node.create_client(ListTools, "/toolkit/list_tools")
    assert tools.wait_for_service(timeout_sec=5)
    answered = threading.Event()
    tools.call_async(ListTools.Request()).add_done_callback(lambda _f: answered.set())
    assert answered.wait(2), "~/list_tools did not answer within 2 s"
    late = goals.send("get_state", {})
    assert late.wait_answered(2)
    dropped = queued[40]  # still queued: cancelled before it started
    assert goals.cancel(dropped, timeout_s=2) == CancelGoal.Response.ERROR_NONE
    assert first.wait_finished(10).status_name == "CANCELED"
    for goal in [*queued, late]:
        goal.wait_finished(120)
    assert dropped.status_name == "CANCELED" and "cancelled before it started" in dropped.result.error
    assert [g.status_name for g in queued if g is not dropped] == ["SUCCEEDED"] * 62
    assert late.status_name == "SUCCEEDED"


def test_a_cancel_sent_while_the_goal_is_being_accepted_is_applied(ros, tmp_path):
    node = toolkit_node(ros, tmp_path, speed=0.05)  # seconds of motion: the cancel finds it running
    goals = goal_client(ros)
    # Hold the node between accepting the goal and submitting its call: a cancel once fell into that gap and
    # was answered for a call that did not exist yet. Now it waits for the submission, then stops the call.
    real_submit, entered, release = node.toolkit.submit, threading.Event(), threading.Event()

    def held_submit(*args, **kwargs):
        entered.set()
        release.wait(10)
        return real_submit(*args, **kwargs)

    node.toolkit.submit = held_submit
    motion = goals.send("move_to", FAR)
    assert motion.wait_answered(10) and entered.wait(10)
    answer = motion.handle.cancel_goal_async()  # sent now; answered once the goal's acceptance is over
    release.set()
    wait_until(answer.done, 30, "the cancel's answer")
    motion.wait_finished(30)
    assert answer.result().return_code == CancelGoal.Response.ERROR_NONE
    assert motion.status_name == "CANCELED", motion.result
    steps = read_steps(tmp_path / "node" / "steps.jsonl")
    assert steps[-1]["tool"] == "move_to" and steps[-1]["cancelled"], steps[-1]


def test_every_accepted_cancel_is_applied_under_a_stream_of_goals(ros, tmp_path):
    toolkit_node(ros, tmp_path, speed=0.05)
    goals = goal_client(ros)
    outcomes = []
    for i in range(60):
        goal = goals.send("move_to", FAR if i % 2 == 0 else {"x_m": 0.05, "y_m": 0.05})
        assert goal.wait_answered(10)
        code = goals.cancel(goal, timeout_s=5)
        goal.wait_finished(30)
        outcomes.append((code, goal.status_name))
    accepted = [status for code, status in outcomes if code == CancelGoal.Response.ERROR_NONE]
    assert accepted == ["CANCELED"] * 60, outcomes


def _run_client(tmp_path, *args: str, timeout_s: float) -> dict:
    """Run remote_calls.py in another process (same ROS environment) and return its JSON summary."""
    report = tmp_path / "client.json"
    done = subprocess.run(
        [sys.executable, str(HERE / "remote_calls.py"), "--report", str(report), *args],
        cwd=tmp_path, capture_output=True, text=True, timeout=timeout_s,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return json.loads(report.read_text())


def test_a_burst_of_100_goals_from_another_process_all_end(ros, tmp_path):
    node = toolkit_node(ros, tmp_path, speed=2.0)
    summary = _run_client(tmp_path, "--calls", "100", "--window", "100", "--mix", "move_to,get_state", timeout_s=180)
    assert summary["unfinished"] == 0 and summary["errors"] == [], summary
    assert summary["statuses"] == {"SUCCEEDED": 100}, summary
    assert len(read_steps(node.config.output_dir / "steps.jsonl")) == 100


@pytest.mark.timeout(900)
def test_1000_goals_from_another_process_all_end(ros, tmp_path):
    toolkit_node(ros, tmp_path)
    summary = _run_client(tmp_path, "--calls", "1000", "--window", "16", "--mix", "get_state", timeout_s=800)
    assert summary["unfinished"] == 0 and summary["errors"] == [], summary
    assert summary["statuses"] == {"SUCCEEDED": 1000}, summary


def test_goals_past_max_goals_are_refused_not_lost(ros, tmp_path):
    node = toolkit_node(ros, tmp_path, speed=0.05, max_goals=4)
    remote = RosToolkit(ros(Node("client")), "/toolkit")
    remote.wait_ready(30)
    world = node.runtime_kwargs["world"]
    calls = [remote.submit("move_to", FAR)]
    moving(world)
    calls += [remote.submit("move_to", NEAR) for _ in range(5)]
    results = [call.result(timeout=60) for call in calls]
    refused = [r for r in results if r.is_error]
    assert [("max_goals" in r.error, "refused" in r.error) for r in refused] == [(True, True)] * 2, [r.error for r in refused]
    assert calls[0].status is not None and not results[0].is_error


def test_a_client_never_waits_for_a_toolkit_node_that_is_not_there(ros):
    remote = RosToolkit(ros(Node("lonely_client")), "/nobody", timeout_s=2.0)
    started = time.monotonic()
    result = remote.submit("get_state", {}).result(timeout=10)
    assert result.is_error and "/nobody/list_tools" in result.error and "within 2.0 s" in result.error, result.error
    assert time.monotonic() - started < 5


def test_a_client_never_waits_for_a_goal_response_that_does_not_come(ros):
    # A node that lists a tool but serves no action for it: the goal is sent, and never answered.
    lister = ros(Node("toolkit", namespace="/half"))
    tools = json.dumps([{"name": "get_state", "description": "", "readonly": True,
                         "input_schema": {"type": "object", "properties": {}, "additionalProperties": False}}])

    def list_tools(_request, response):
        response.tools_json = tools
        return response

    lister.create_service(ListTools, "~/list_tools", list_tools)
    remote = RosToolkit(ros(Node("hopeful_client")), "/half/toolkit", timeout_s=2.0)
    started = time.monotonic()
    result = remote.submit("get_state", {}).result(timeout=10)
    assert result.is_error and "/half/toolkit/call_tool" in result.error and "within 2.0 s" in result.error, result.error
    assert time.monotonic() - started < 5


def test_a_call_ends_when_its_toolkit_node_dies(ros, tmp_path):
    node_process = subprocess.Popen(
        [sys.executable, "-c", "from rpent_ros.toolkit.toolkit_node import main; main()", "--ros-args",
         "-r", "__ns:=/dying", "-p", "robot:=toy", "-p", "speed:=0.02", "-p", f"output_dir:={tmp_path / 'node'}"],
        cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )
    try:
        remote = RosToolkit(ros(Node("client_of_the_dying")), "/dying/toolkit", timeout_s=5.0)
        remote.wait_ready(60)
        stages: list[str] = []
        call = remote.submit("move_to", FAR, on_stage=lambda s, m, p: stages.append(s))
        wait_until(lambda: "running" in stages, 30, "the motion starts")
        os.kill(node_process.pid, signal.SIGKILL)
        killed = time.monotonic()
        result = call.result(timeout=30)
        assert result.is_error and "went away" in result.error, result.error
        # A killed process is dropped from the DDS graph when its lease runs out (Cyclone: 10 s).
        assert time.monotonic() - killed < 15
    finally:
        if node_process.poll() is None:
            os.killpg(node_process.pid, signal.SIGKILL)
        node_process.wait(10)


def test_a_motion_reports_progress_five_times_a_second(ros, tmp_path):
    toolkit_node(ros, tmp_path, speed=0.15)  # 0.37 m: about 2.5 s
    goals = goal_client(ros)
    motion = goals.send("move_to", FAR)
    motion.wait_finished(60)
    assert motion.status_name == "SUCCEEDED"
    # While it runs: "running", then the toy's own stage "moving" (repeated with its elapsed time).
    running = [(t, fb) for t, fb in motion.feedback if fb.stage in ("running", "moving")]
    assert [fb.stage for _, fb in running[:2]] == ["running", "moving"], running[:2]
    duration = running[-1][0] - running[0][0]
    assert duration > 1.5
    gaps = [b[0] - a[0] for a, b in itertools.pairwise(running)]
    assert len(running) >= 4 * duration and max(gaps) < 0.5, gaps
    elapsed = [fb.elapsed_s for _, fb in running]
    assert elapsed == sorted(elapsed) and elapsed[-1] > 1.5
    assert all(fb.message == "succeeded" for _, fb in motion.feedback if fb.stage == "done")


def test_every_goal_ends_with_the_status_of_the_rule(ros, tmp_path):
    node = toolkit_node(ros, tmp_path, speed=0.05)
    goals = goal_client(ros)
    cases = {
        "ran and returned": goals.send("get_state", {}),
        "arguments not JSON": goals.send("move_to", arguments_json="{x_m: 1"),
        "arguments not an object": goals.send("move_to", arguments_json="[0.1, 0.2]"),
        "unknown tool": goals.send("fly", {}),
        "refused by validation": goals.send("move_to", {"x_m": 5, "y_m": 0.1}),
        "the tool failed": goals.send("grasp", {}),  # at the start the fingers are 0.18 m above every block
    }
    for goal in cases.values():
        goal.wait_finished(30)
    cancelled = goals.send("move_to", FAR)
    assert cancelled.wait_answered(10)
    moving(node.runtime_kwargs["world"])
    wait_until(lambda: "running" in {fb.stage for _, fb in cancelled.feedback}, 5, "the running goal says so")
    assert goals.cancel(cancelled) == CancelGoal.Response.ERROR_NONE
    cases["cancelled"] = cancelled.wait_finished(30)
    expected = {"ran and returned": "SUCCEEDED", "cancelled": "CANCELED"}
    statuses = {case: goal.status_name for case, goal in cases.items()}
    assert statuses == {case: expected.get(case, "ABORTED") for case in cases}
    refused = {"arguments not JSON", "arguments not an object", "unknown tool", "refused by validation"}
    for case, goal in cases.items():
        assert goal.result.is_error == (statuses[case] != "SUCCEEDED"), case
        stages = {fb.stage for _, fb in goal.feedback}
        # A goal that never ran never says it was queued or running.
        assert not (case in refused and stages & {"queued", "running"}), (case, stages)
        # The "done" feedback names the status. (It can arrive after the result, which rclpy's client
        # then drops: feedback and results travel on different channels.)
        for _, fb in goal.feedback:
            if fb.stage == "done":
                assert fb.message.split(":")[0] == statuses[case].lower(), (case, fb.message)


def _fields(error: str) -> list[str]:
    """The field each part of a refusal names ("invalid arguments for tool 't': a: rule; b: rule")."""
    return [part.split(":")[0] for part in error.split(": ", 1)[1].split("; ")]


def test_ros_toolkit_refuses_bad_arguments_before_sending_anything(ros, tmp_path):
    node = toolkit_node(ros, tmp_path)
    remote = RosToolkit(ros(Node("client")), "/toolkit")
    remote.wait_ready(30)
    in_process = node.toolkit
    cases = ({"x_m": 5, "y_m": 0.1}, {"x_m": 0.1}, {"x_m": 0.1, "y_m": 0.1, "speed": 1}, {"x_m": True, "y_m": 0.1},
             {"x_m": "0.1", "y_m": 0.1}, {"x_m": float("nan"), "y_m": 0.1}, {"x_m": (0.1,), "y_m": 0.1}, "[0.1]")
    for arguments in cases:
        call = remote.submit("move_to", arguments)
        assert call.done() and call.status is None, arguments  # refused here: no goal was sent
        local, there = call.result().error, in_process.execute_tool("move_to", arguments).error
        assert local and there and local.startswith("invalid arguments for tool 'move_to': "), (arguments, local)
        assert _fields(local) == _fields(there), (arguments, local, there)
    assert remote.execute_tool("move_to", {"x_m": 5, "y_m": 0.1}).error == (
        "invalid arguments for tool 'move_to': x_m: Input should be less than or equal to 0.6 (got 5)")
    unknown = remote.execute_tool("fly", {})
    assert unknown.error == in_process.execute_tool("fly", {}).error
    # The node's record holds only the in-process calls above: nothing refused here reached it.
    assert len(read_steps(node.config.output_dir / "steps.jsonl")) == len(cases) + 1
    assert not remote.execute_tool("move_to", {"x_m": 0.2, "y_m": 0.2}).is_error


def test_franka_feedback_carries_the_arm_pose_and_a_safety_refusal_aborts(ros, franka_sim_toolkit, tmp_path):
    node = franka_sim_toolkit(tmp_path / "franka")
    goals = goal_client(ros)
    runtime = node.runtime_kwargs["runtime"]
    motion = goals.send("move_to", {"x_m": 0.45, "y_m": 0.2, "z_m": 0.45, "speed_factor": 0.1})
    assert motion.wait_finished(120).status_name == "SUCCEEDED", motion.result.error
    with_poses = [fb for _, fb in motion.feedback if fb.poses]
    assert len(with_poses) >= 3, "a motion of a second or more reports the arm pose a few times"
    assert {p.header.frame_id for fb in with_poses for p in fb.poses} == {f"{name}_link0" for name in runtime.arms}
    first, last = with_poses[0].poses[0].pose.position, with_poses[-1].poses[0].pose.position
    assert (last.x, last.y, last.z) != (first.x, first.y, first.z)  # it moved while it reported
    # Inside the workspace box (which the schema states) but with the hand tilted 90 degrees from pointing
    # down: only the envelope's tilt rule refuses it.
    refused = goals.send("move_to", {"x_m": 0.45, "y_m": 0.0, "z_m": 0.4, "roll_rad": 1.5708})
    refused.wait_finished(60)
    assert refused.status_name == "ABORTED" and "MotionRefused" in refused.result.error, refused.result.error
    assert all(fb.message.startswith("aborted: ") for _, fb in refused.feedback if fb.stage == "done")
