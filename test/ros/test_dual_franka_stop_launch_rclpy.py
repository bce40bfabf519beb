"""Stopping the arms of `ros2 launch rpent dual_franka.launch.py use_sim:=true mcp_bridge:=true`, as a lab
does: Ctrl-C on the stock `ros2 action send_goal`, and the latched stop (`/toolkit/stop`, issue 33) that
every interface obeys until `/toolkit/release_stop`, and that a restarted toolkit node still holds.

One launch serves the module; what moved is read from franky-sim's own joint record (and /joint_states).
The latched stop's test ends the launch (it kills the toolkit node, and a node that dies ends a launch),
so it is the module's last.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import signal
import threading
import time
from typing import Any

import pytest

rclpy = pytest.importorskip("rclpy", reason="rclpy not importable: ROS 2 is not sourced")
pytest.importorskip("rpent.action", reason="rpent interfaces not generated: colcon build this package and source it")
if shutil.which("ros2") is None:
    pytest.skip("the ros2 command is not on PATH", allow_module_level=True)

from output_lines import OutputLines  # noqa: E402
from rclpy.node import Node  # noqa: E402
from rclpy.parameter import Parameter  # noqa: E402
from sim_process import free_sim_hosts  # noqa: E402
from std_srvs.srv import Trigger  # noqa: E402

from robots.franka.hardware.franky_arm import at_rest  # noqa: E402
from rpent.record.steps import read_steps  # noqa: E402
from rpent.tools.stop_latch import FILE_NAME, robot_latch  # noqa: E402
from rpent_ros.toolkit.client import RosToolkit  # noqa: E402

from .goals import wait_until  # noqa: E402
from .launch_process import JointRecord, Launch, environment  # noqa: E402
from .services import call_service, latch_of  # noqa: E402
from .stock_cli import SendGoal  # noqa: E402

pytestmark = [pytest.mark.ros, pytest.mark.slow, pytest.mark.timeout(420)]
ROBOT = "dual_franka"
RELEASE = "an operator must release it"
SLOW_LIFT = {"arm": "left", "dz_m": 0.09, "speed_factor": 0.05}  # seconds of motion: stopped long before its end
LIFT = {"arm": "left", "dz_m": 0.02}
STILL_RAD = 1e-3  # the simulated arms at rest move less than this (their PD hold)
# A stopped arm, from the moment franky judges it at rest, settles by up to ~1.3e-3 rad more; the lift, run,
# turns the left arm's joints by some 0.08 rad.
SETTLING_RAD = 5e-3


@pytest.fixture(scope="module")
def launched(tmp_path_factory):
    """The launch, its joint record, its run record, and the robot's state directory (where its latched
    stop outlives the toolkit node: the launch passes RPENT_STATE_DIR, this module's own)."""
    base = tmp_path_factory.mktemp("dual_franka")
    record = JointRecord(base / "joints.jsonl")
    state_dir = base / "state"
    launch = Launch("dual_franka.launch.py", "use_sim:=true", f"sim_hosts:={','.join(free_sim_hosts(205, 214, 2))}",
                    f"sim_joint_record:={record.path}", f"output_dir:={base / 'run'}", "mcp_bridge:=true",
                    "mcp_port:=0", log=base / "launch.log", env=environment(RPENT_STATE_DIR=str(state_dir)))
    try:
        launch.wait_for("tools served", 240)
        launch.wait_for("MCP server listening on http", 60)  # on a free port, which it names
        listening = re.search(r"MCP server listening on (http://\S+)", launch.text())
        assert listening is not None, launch.text()[-3000:]
        yield {"base": base, "launch": launch, "record": record, "state_dir": state_dir, "mcp_url": listening[1]}
    finally:
        launch.stop()
        print(launch.text()[-4000:])  # shown by pytest when a test failed


class JointStates:
    """/joint_states of the left arm: (the state's own stamp, the time it was measured, positions)."""

    # At rest: no joint faster than this, over any 0.25 s. The test's motion (speed factor 0.05) moves
    # its fastest joint at 0.15-0.24 rad/s (the joint record); franky-sim's PD hold settles below 1e-3 within a second.
    REST_RAD_S, WINDOW_S = 1e-3, 0.25

    def __init__(self, node: Node) -> None:
        from sensor_msgs.msg import JointState

        self.lock = threading.Lock()
        self.seen: list[tuple[float, list[float]]] = []
        node.create_subscription(JointState, "/joint_states", self._receive, 50)

    def _receive(self, msg) -> None:
        positions = [q for name, q in zip(msg.name, msg.position, strict=False) if name.startswith("left_joint")]
        if len(positions) == 7:
            with self.lock:
                self.seen.append((msg.header.stamp.sec + msg.header.stamp.nanosec * 1e-9, positions))

    def moved_since(self, since: float) -> float:
        with self.lock:
            after = [q for t, q in self.seen if t >= since]
        return max((abs(a - b) for q in after for a, b in zip(q, after[0], strict=True)), default=0.0)

    def at_rest_since(self, since: float) -> float | None:
        """The stamp from which every later state (for at least 0.5 s) shows each joint slower than REST_RAD_S
        over the WINDOW_S before it; None if the arm has not come to rest yet."""
        with self.lock:
            states = sorted(self.seen)
        slow = []
        for t, q in states:
            earlier = [p for s, p in states if t - 2 * self.WINDOW_S <= s <= t - self.WINDOW_S]
            if earlier:
                speed = max(abs(a - b) for a, b in zip(q, earlier[-1], strict=True)) / self.WINDOW_S
                slow.append((t, speed < self.REST_RAD_S))
        for i, (t, _) in enumerate(slow):
            if t >= since and slow[-1][0] - t >= 0.5 and all(ok for _, ok in slow[i:]):
                return t
        return None


def test_ctrl_c_on_the_stock_send_goal_stops_an_arm_of_the_dual_franka_launch(launched, ros):
    record, run_dir = launched["record"], launched["base"] / "run"
    joints = JointStates(ros(Node("joint_watcher")))
    cli = SendGoal("/toolkit/call_tool", SLOW_LIFT, tool="move_by", cwd=launched["base"])
    try:
        cli.wait_for("stage: moving", 60)
        running = time.time()
        wait_until(lambda: joints.moved_since(running) > 0.005, 30, "the left arm moves on /joint_states")
        code = cli.ctrl_c(60)
        pressed = cli.pressed_at  # the press ros2cli acted on
        out = cli.output
        assert "Canceling goal..." in out and "Goal finished with status: CANCELED" in out, out
        assert code == 0, out
        # What rviz and `ros2 topic echo /joint_states` show: the arm comes to rest.
        wait_until(lambda: joints.at_rest_since(pressed) is not None, 30, "the left arm at rest on /joint_states")
        # Within 1 s of the Ctrl-C on the robot's own clock (the wall figure is in the message).
        wait_until(lambda: record.rest_after("left", pressed) is not None, 30,
                   "the left arm at rest in the simulator's joint record")
        robot_s, wall_s = record.rest_after("left", pressed)
        print(f"\nat rest {robot_s:.2f} s after the Ctrl-C on the robot's clock ({wall_s:.2f} s wall)")
        assert robot_s < 1.0, f"at rest {robot_s:.2f} s after the Ctrl-C on the robot's clock ({wall_s:.2f} s wall)"
        steps = read_steps(run_dir / "steps.jsonl")
        assert steps[-1]["tool"] == "move_by" and steps[-1]["cancelled"], steps[-1]
    finally:
        cli.kill()


def _moving(record: JointRecord, arm: str) -> bool:
    """The simulator's last record shows `arm` moving (not at rest as franky judges it)."""
    lines = record.lines()
    return bool(lines) and not at_rest(lines[-1]["dq"][arm])


def _moved_since(record: JointRecord, since: float) -> list[dict]:
    """The simulator's records from `since` (wall time) on in which an arm is not at rest."""
    return [r for r in record.lines() if r["t"] >= since and not all(at_rest(dq) for dq in r["dq"].values())]


def _joints(remote: RosToolkit) -> list[float]:
    """Both arms' joints, as get_state reads them."""
    state = remote.execute_tool("get_state", {})
    assert not state.is_error, state.error
    return [q for arm in ("left", "right") for q in state.data["arms"][arm]["joints_rad"]]


def _mcp_call(url: str, tool: str, arguments: dict) -> tuple[bool, dict]:
    """A call through the launch's MCP bridge with the mcp SDK's client: (is_error, the result's JSON)."""
    import mcp

    async def main() -> tuple[bool, dict]:
        async with mcp.Client(url) as client:
            result = await client.call_tool(tool, arguments)
            return bool(result.is_error), json.loads(result.content[0].text)

    return asyncio.run(main())


def _dashboard(ros, tmp_path) -> Any:
    """A dashboard node against /toolkit whose tasks replay a lift of the left hand, then finish; its session
    started (the toolkit node answers)."""
    from rpent_ros.operator.dashboard_node import DashboardNode

    recipe = tmp_path / "lift.jsonl"
    recipe.write_text(json.dumps({"tool": "move_by", "arguments": LIFT}) + "\n"
                      + json.dumps({"tool": "finish", "arguments": {"status": "success", "summary": "Lifted."}}) + "\n")
    dashboard = ros(DashboardNode(parameter_overrides=[
        Parameter("robot", value=ROBOT), Parameter("planner", value="replay"), Parameter("recipe", value=str(recipe)),
        Parameter("output_dir", value=str(tmp_path / "dashboard"))]))
    dashboard.session.start()
    return dashboard.session


def test_the_latched_stop_holds_against_every_interface_until_released_and_across_a_restart(launched, ros, tmp_path,
                                                                                             monkeypatch):
    record, launch, state_dir = launched["record"], launched["launch"], launched["state_dir"]
    monkeypatch.setenv("RPENT_STATE_DIR", str(state_dir))  # this process's dashboard follows the launch's latch
    client = ros(Node("latch_client"))
    remote = RosToolkit(client, "/toolkit")
    clis: list[SendGoal] = []
    restarted: OutputLines | None = None
    try:
        remote.wait_ready(60)
        dashboard = _dashboard(ros, tmp_path)
        assert latch_of(client) == {"latched": False}
        # /toolkit/stop during a slow motion started from the stock CLI: the goal ends, the arm stops.
        clis.append(SendGoal.of_tool("move_by", SLOW_LIFT, cwd=tmp_path))
        wait_until(lambda: _moving(record, "left"), 60, "the left arm moving in the simulator's joint record")
        asked = time.time()
        stopped = call_service(client, Trigger, "/toolkit/stop")
        line = stopped.message
        assert stopped.success and line.startswith("stopped by ROS /toolkit/stop at ") and line.endswith(RELEASE), line
        clis.append(SendGoal.of_tool("move_by", LIFT, cwd=tmp_path))  # to be refused; starts while the arm stops
        out = clis[0].finished(60)
        # Not a ROS cancel of this goal: the node could not carry it out (goal_status.py), with the latch's line.
        assert "Goal finished with status: ABORTED" in out, out[-3000:]
        assert clis[0].printed_result()["error"] == f"cancelled: {line}", out[-3000:]
        wait_until(lambda: record.rest_after("left", asked) is not None, 30, "the left arm at rest")
        robot_s, wall_s = record.rest_after("left", asked)
        print(f"\n/toolkit/stop: the left arm at rest {robot_s:.2f} s later on the robot's clock ({wall_s:.2f} s wall)")
        assert robot_s < 1.0, (robot_s, wall_s)
        rested = asked + wall_s

        # Latched: every interface's motion is refused with the latch's line, and nothing moves.
        is_error, answer = _mcp_call(launched["mcp_url"], "move_by", LIFT)
        assert is_error and answer["error"] == line, answer
        for tool, arguments in (("move_by", LIFT), ("open_gripper", {"arm": "right"})):  # the planner node's path
            refused = remote.execute_tool(tool, arguments)
            assert refused.is_error and refused.error == line, (tool, refused.error)
        state = remote.execute_tool("get_state", {})  # read-only tools go on, and show the latch
        assert not state.is_error and state.data["stop_latch"]["line"] == line, state.error or state.data
        dashboard.start_task({"task": "Lift the left hand 2 cm."})
        assert dashboard.wait_task(60), "the dashboard's task did not end within 60 s"
        page = dashboard.snapshot()
        assert page["stop_latch"]["latched"] is True and page["stop_latch"]["line"] == line, page["stop_latch"]
        # The task ends at its refused lift, with the latch's line (a refused call is in the record, not on the
        # page's timeline: it never started).
        task = page["task"]
        assert task["status"] == "error" and task["summary"]["error"].endswith(f"(move_by, line 1) failed: {line}"), task
        steps = read_steps(tmp_path / "dashboard" / task["id"] / "steps.jsonl")
        assert [(s["tool"], s["error"]) for s in steps] == [("move_by", line)], steps
        kept = json.loads((tmp_path / "dashboard" / task["id"] / "result.json").read_text())["stop_latch"]
        assert kept["latched"] is True and kept["line"] == line, kept  # the toolkit node's latch, as the task ended
        out = clis[1].finished(60)
        assert "Goal finished with status: ABORTED" in out, out[-3000:]
        assert clis[1].printed_result()["error"] == line, out[-3000:]  # refused before it began: no feedback need come
        refused_by = time.time()
        wait_until(lambda: record.lines()[-1]["t"] > refused_by, 10, "the simulator's record after the refusals")
        assert _moved_since(record, rested) == [] and record.largest_change(rested) < SETTLING_RAD
        assert latch_of(client)["line"] == line

        # Released by the operator: the same goal runs.
        released = call_service(client, Trigger, "/toolkit/release_stop")
        assert released.success and released.message == "released", released.message
        assert latch_of(client) == {"latched": False}
        moved_from = time.time()
        clis.append(SendGoal.of_tool("move_by", LIFT, cwd=tmp_path))
        out = clis[-1].finished(60)
        assert "Goal finished with status: SUCCEEDED" in out, out[-3000:]
        assert record.largest_change(moved_from) > 0.005
        is_error, answer = _mcp_call(launched["mcp_url"], "move_by", {**LIFT, "dz_m": -LIFT["dz_m"]})  # and back
        assert not is_error, answer

        # Latched again, the toolkit node killed: the launch ends with it. A toolkit node started again for
        # the robot with its state directory (its arms in the node this time: the arm nodes went with the
        # launch) comes up stopped.
        line = call_service(client, Trigger, "/toolkit/stop").message
        assert json.loads((state_dir / ROBOT / FILE_NAME).read_text())["latched"] is True
        killed = launch.pid_of("toolkit")
        os.kill(killed, signal.SIGKILL)
        restarted = OutputLines(
            ["ros2", "run", "rpent", "toolkit_node", "--ros-args", "-p", f"robot:={ROBOT}", "-p", "sim:=true",
             "-p", "runtime_mode:=inprocess", "-p", f"sim_hosts:={','.join(free_sim_hosts(205, 214, 2))}",
             "-p", f"output_dir:={tmp_path / 'restarted'}"],
            env=environment(RPENT_STATE_DIR=str(state_dir)))
        launch.wait_for(f"process has died [pid {killed}, exit code -9", 30)
        assert restarted.wait_for_text("tools served", 120), restarted.output[-3000:]
        assert f"the stop latch read from {state_dir / ROBOT / FILE_NAME} holds: {line}" in restarted.output, \
            restarted.output[-3000:]
        latch = latch_of(client)
        assert latch["latched"] is True and latch["line"] == line, latch
        remote.wait_ready(60)
        before = _joints(remote)
        refused = remote.execute_tool("move_by", LIFT)
        assert refused.is_error and refused.error == line, refused.error
        after = _joints(remote)
        assert max(abs(a - b) for a, b in zip(after, before, strict=True)) < STILL_RAD, (before, after)
        launch.wait_exit(60)
    finally:
        for cli in clis:
            cli.kill()
        # The operator's release, so no later run of this robot's state directory starts stopped.
        latch = robot_latch(ROBOT, state_dir)
        if latch.latched:
            latch.release("the test's cleanup")
        if restarted is not None and restarted.proc.poll() is None:
            os.killpg(restarted.proc.pid, signal.SIGINT)
            restarted.proc.wait(60)
