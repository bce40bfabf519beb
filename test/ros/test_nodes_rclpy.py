"""toolkit_node and planner_node with rclpy, over DDS on loopback.

Skipped where rclpy or the generated rpent interfaces cannot be imported (CI has no ROS 2; run these
in a sourced ROS 2 Jazzy workspace where this package was built with colcon).
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
import threading
from pathlib import Path

import pytest

rclpy = pytest.importorskip("rclpy", reason="rclpy not importable: ROS 2 is not sourced")
pytest.importorskip("rpent.action", reason="rpent interfaces not generated: colcon build this package and source it")

from action_msgs.msg import GoalStatus  # noqa: E402
from rclpy.node import Node  # noqa: E402
from rclpy.parameter import Parameter  # noqa: E402

from rpent.record.steps import read_steps  # noqa: E402
from rpent_ros.operator.planner_node import PlannerNode  # noqa: E402
from rpent_ros.toolkit.client import RosToolkit  # noqa: E402
from rpent_ros.toolkit.toolkit_node import ToolkitNode  # noqa: E402

pytestmark = [pytest.mark.ros, pytest.mark.slow, pytest.mark.timeout(120)]
RECIPE = Path(__file__).resolve().parents[2] / "robots" / "toy" / "recipes" / "red_block_in_bin.jsonl"


def toolkit_node(ros, tmp_path, speed=0.5):
    return ros(ToolkitNode(parameter_overrides=[
        Parameter("robot", value="toy"), Parameter("output_dir", value=str(tmp_path / "node")), Parameter("speed", value=speed),
    ]))


def client(ros):
    remote = RosToolkit(ros(Node("test_client")), "/toolkit")
    remote.wait_ready(30)
    return remote


def test_list_tools_reports_every_tool_with_schema_and_readonly(ros, tmp_path):
    toolkit_node(ros, tmp_path)
    tools = {t.name: t for t in client(ros).list_tools()}
    assert {"move_to", "grasp", "release", "get_state", "capture_image", "finish", "read_image"} <= set(tools)
    assert tools["get_state"].readonly and not tools["move_to"].readonly
    assert tools["move_to"].input_schema["required"] == ["x_m", "y_m"]


def test_tool_call_reports_feedback_and_returns_images(ros, tmp_path):
    toolkit_node(ros, tmp_path)
    remote = client(ros)
    stages = []
    call = remote.submit("move_to", {"x_m": 0.2, "y_m": 0.2}, on_stage=lambda s, m, p: stages.append(s))
    result = call.result(timeout=60)
    assert not result.is_error, result.error
    assert result.data["action"] == "move_to" and result.data["gripper_xyz_m"][:2] == [0.2, 0.2]
    assert len(result.images) == 1 and result.images[0][:4] == b"\x89PNG"
    assert call.status == GoalStatus.STATUS_SUCCEEDED
    assert "running" in stages and "capturing" in stages and stages[-1] == "done"


def test_bad_arguments_come_back_as_an_error_result(ros, tmp_path):
    toolkit_node(ros, tmp_path)
    result = client(ros).execute_tool("move_to", {"x_m": 5, "y_m": 0.1})
    assert result.is_error and "x_m" in result.error and "less than or equal to 0.6" in result.error


def test_ros_cancel_stops_exactly_that_goal(ros, tmp_path):
    node = toolkit_node(ros, tmp_path, speed=0.02)
    remote = client(ros)
    stages = []
    moving = remote.submit("move_to", {"x_m": 0.5, "y_m": 0.5}, on_stage=lambda s, m, p: stages.append(s))
    queued = remote.submit("get_state", {})
    world = node.runtime_kwargs["world"]
    start = list(world.gripper_xyz)
    pause = threading.Event()
    for _ in range(1500):  # bounded wait (30 s) until the arm is visibly moving
        if world.gripper_xyz != start:
            break
        pause.wait(0.02)
    # Stage feedback follows the goal's status message by STATUS_LEAD_S (rpent_ros.toolkit.goals), so it may
    # trail the motion.
    for _ in range(250):  # bounded wait (5 s)
        if "running" in stages:
            break
        pause.wait(0.02)
    assert "running" in stages
    assert moving.cancel()
    result = moving.result(timeout=30)
    assert result.is_error and "cancelled" in result.error
    assert moving.status == GoalStatus.STATUS_CANCELED
    assert world.stops == 1
    after = list(world.gripper_xyz)
    assert after != start and after[:2] != [0.5, 0.5]  # it moved some, then stopped short of the target
    pause.wait(0.2)
    assert list(world.gripper_xyz) == after  # and stays stopped
    assert not queued.result(timeout=30).is_error  # the other goal was not touched


def test_readonly_goals_overlap_and_exclusive_goals_wait(ros, tmp_path):
    node = toolkit_node(ros, tmp_path)
    remote = client(ros)
    first = remote.submit("observe", {"duration_s": 1.5})
    second = remote.submit("observe", {"duration_s": 1.5})
    assert not first.result(timeout=60).is_error and not second.result(timeout=60).is_error
    looking = remote.submit("observe", {"duration_s": 1.0})
    moving = remote.submit("move_to", {"x_m": 0.2, "y_m": 0.3})
    assert not looking.result(timeout=60).is_error and not moving.result(timeout=60).is_error
    # The toolkit node's own record says when each call ran (feedback and results travel on
    # different ROS channels, so their arrival order proves nothing).
    r1, r2, r3, e = read_steps(node.config.output_dir / "steps.jsonl")
    assert r2["started_at"] < r1["ended_at"] and r1["started_at"] < r2["ended_at"]  # read-only goals overlapped
    assert (r3["tool"], e["tool"]) == ("observe", "move_to")
    assert e["started_at"] >= r3["ended_at"]  # the exclusive goal waited for the read-only one


def test_planner_node_reaches_finish_through_the_ros_client(ros, tmp_path):
    toolkit_node(ros, tmp_path)
    look = tmp_path / "look.jsonl"
    look.write_text('{"tool": "get_state", "arguments": {}}\n')
    # One long-lived toolkit node, two tasks; the world carries over (the block stays in the bin),
    # the record and the finish result do not.
    for run, recipe in (("first", RECIPE), ("second", look)):
        planner = ros(PlannerNode(parameter_overrides=[
            Parameter("robot", value="toy"), Parameter("planner", value="replay"),
            Parameter("recipe", value=str(recipe)), Parameter("output_dir", value=str(tmp_path / run)),
        ]))
        summary = planner.run_task()
        assert summary["status"] == "finished" and summary["solved"] is True
        assert summary["turns"] == len(recipe.read_text().splitlines())
        assert (tmp_path / run / "result.json").exists()
    records = sorted(p.name for p in (tmp_path / "node").iterdir() if p.name.startswith("task-"))
    assert records == ["task-002", "task-003"]
    second = read_steps(tmp_path / "node" / "task-003" / "steps.jsonl")
    # The replay calls finish itself only when the toolkit has no finish yet: the old one was cleared.
    assert [s["tool"] for s in second] == ["get_state", "finish"]


def test_a_second_planner_node_into_the_same_output_dir_is_refused_and_the_first_result_stays(ros, tmp_path):
    toolkit_node(ros, tmp_path)
    look = tmp_path / "look.jsonl"
    look.write_text('{"tool": "get_state", "arguments": {}}\n')
    out = tmp_path / "planner"

    def planner(recipe: Path, *extra: Parameter) -> PlannerNode:
        return ros(PlannerNode(parameter_overrides=[
            Parameter("robot", value="toy"), Parameter("planner", value="replay"), Parameter("recipe", value=str(recipe)),
            Parameter("output_dir", value=str(out)), *extra,
        ]))

    assert planner(RECIPE).run_task()["turns"] == len(RECIPE.read_text().splitlines())
    first = (out / "result.json").read_text()
    # As `ros2 run rpent planner_node` would start it: a second run into the same directory.
    again = subprocess.run(
        [sys.executable, "-c", "from rpent_ros.operator.planner_node import main; main()", "--ros-args", "-p", "robot:=toy",
         "-p", "planner:=replay", "-p", f"recipe:={look}", "-p", f"output_dir:={out}"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
    )
    assert (out / "result.json").read_text() == first  # not replaced by the second run's
    assert again.returncode == 2 and "Traceback" not in again.stderr, again.stderr
    assert (f"planner_node: parameter output_dir: {out} is not empty: it holds a run record; each run needs a new "
            "or empty directory (pass resume:=true to continue that record as a new segment)") in again.stderr
    # resume:=true continues the record as segment 2, beside the first run's files.
    summary = planner(look, Parameter("resume", value=True)).run_task()
    assert summary["segment"] == 2 and summary["turns"] == 1 and summary["status"] == "finished"
    assert json.loads((out / "result-2.json").read_text())["segment"] == 2
    assert (out / "transcript-2.json").exists() and (out / "result.json").read_text() == first
    claims = [json.loads(line) for line in (out / "segments.jsonl").read_text().splitlines()]
    assert [c["segment"] for c in claims] == [1, 2]


def test_ros_cancel_stops_a_franky_sim_motion(ros, franka_sim_toolkit, tmp_path):
    node = franka_sim_toolkit(tmp_path / "franka")
    remote = client(ros)
    runtime = node.runtime_kwargs["runtime"]
    start = runtime.arm().state().pose.position
    stages: list[str] = []
    moving = remote.submit("move_to", {"x_m": 0.45, "y_m": 0.25, "z_m": 0.45, "speed_factor": 0.05},
                           on_stage=lambda s, m, p: stages.append(s))
    pause = threading.Event()
    for _ in range(1500):  # bounded wait (30 s) until the arm is visibly moving
        if math.dist(runtime.arm().state().pose.position, start) > 0.01:
            break
        pause.wait(0.02)
    assert moving.cancel()
    result = moving.result(timeout=30)
    assert result.is_error and "cancelled" in result.error
    assert moving.status == GoalStatus.STATUS_CANCELED
    pause.wait(1.0)  # franky-sim's PD controller settles a stopped arm within ~0.5 s
    settled = runtime.arm().state().pose.position
    assert math.dist(settled, (0.45, 0.25, 0.45)) > 0.05  # stopped well short of the target
    pause.wait(0.5)
    assert math.dist(runtime.arm().state().pose.position, settled) < 0.002  # and holds still


def test_mcp_bridge_node_serves_a_remote_tool(ros, tmp_path):
    import asyncio

    import mcp

    from rpent_ros.operator.mcp_bridge_node import McpBridgeNode

    toolkit_node(ros, tmp_path)
    bridge = ros(McpBridgeNode())

    async def main():
        async with mcp.Client(bridge.server()) as client:
            names = [t.name for t in (await client.list_tools()).tools]
            return names, await client.call_tool("move_to", {"x_m": 0.3, "y_m": 0.1})

    names, result = asyncio.run(main())
    assert "move_to" in names and "read_image" not in names
    assert result.is_error is False
    assert any(block.type == "image" for block in result.content)
