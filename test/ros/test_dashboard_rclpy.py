"""dashboard_node against a toolkit_node over DDS on loopback: tasks, timeline, record, abort.

Skipped where rclpy or the generated rpent interfaces cannot be imported (CI has no ROS 2).
"""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

rclpy = pytest.importorskip("rclpy", reason="rclpy not importable: ROS 2 is not sourced")
pytest.importorskip("rpent.action", reason="rpent interfaces not generated: colcon build this package and source it")

from rclpy.parameter import Parameter  # noqa: E402

from rpent.record.steps import read_steps  # noqa: E402
from rpent_ros.operator.dashboard_node import DashboardNode  # noqa: E402
from rpent_ros.toolkit.toolkit_node import ToolkitNode  # noqa: E402

pytestmark = [pytest.mark.ros, pytest.mark.slow, pytest.mark.timeout(120)]
RECIPE = Path(__file__).resolve().parents[2] / "robots" / "toy" / "recipes" / "red_block_in_bin.jsonl"


@pytest.fixture
def nodes(ros, tmp_path):
    """A toolkit node and a dashboard node against it; the session is started."""

    def make(robot: str = "toy", **toolkit_params) -> tuple[ToolkitNode, DashboardNode]:
        toolkit = ros(ToolkitNode(parameter_overrides=[
            Parameter("robot", value=robot), Parameter("output_dir", value=str(tmp_path / "node")),
            Parameter("action_clips", value=True), *(Parameter(k, value=v) for k, v in toolkit_params.items()),
        ]))
        dashboard = ros(DashboardNode(parameter_overrides=[
            Parameter("robot", value=robot), Parameter("planner", value="replay"), Parameter("recipe", value=str(RECIPE)),
            Parameter("output_dir", value=str(tmp_path / "dashboard")),
        ]))
        dashboard.session.start()
        return toolkit, dashboard

    return make


def test_task_from_the_dashboard_runs_on_the_toolkit_node_and_keeps_one_record(nodes, tmp_path):
    toolkit, dashboard = nodes(speed=1.0)
    session = dashboard.session
    assert [(c["name"], c["status"]) for c in session.snapshot()["components"]] == [("toolkit", "ready")]
    session.start_task({"task": "Put the red block in the bin."})
    assert session.wait_task(60)
    task = session.snapshot()["task"]
    assert task["status"] == "finished" and task["finish"]["status"] == "success" and task["solved"] is True
    recipe_tools = [json.loads(line)["tool"] for line in RECIPE.read_text().splitlines() if line.strip()] + ["finish"]
    # Every tool event crossed DDS before the task ended: the timeline is complete and in order.
    assert [row["tool"] for row in task["timeline"]] == recipe_tools
    assert all(row["status"] == "ok" for row in task["timeline"])
    moved = next(row for row in task["timeline"] if row["tool"] == "move_to")
    assert moved["images"] and moved["clip"], "observation images and the action clip link to the task's record"
    # The toolkit node wrote its record into the dashboard's task directory, next to result.json.
    record = tmp_path / "dashboard" / "task-001"
    assert [s["tool"] for s in read_steps(record / "steps.jsonl")] == recipe_tools
    assert (record / "episode.mp4").stat().st_size > 0
    summary = json.loads((record / "result.json").read_text())
    assert summary["recipe"] and Path(summary["recipe"]).is_file()
    assert {"episode.mp4", "steps.jsonl", "recipe"} <= set(task["artifacts"])
    # The camera view of the toy robot is the toolkit node's last observation image.
    assert session.frames.sample_once("top") is not None and session.frames.latest("top").jpeg


def test_abort_from_the_dashboard_stops_the_remote_motion_and_the_node_keeps_serving(nodes):
    toolkit, dashboard = nodes(speed=0.01)  # the first move would take ~30 s
    session = dashboard.session
    world = toolkit.runtime_kwargs["world"]
    moving = threading.Event()
    forward = dashboard.tool_events.forward

    def watch(kind, payload):
        forward(kind, payload)
        if kind == "tool_started" and payload.get("tool") == "move_to":
            moving.set()

    dashboard.tool_events.forward = watch
    session.start_task({"task": "Put the red block in the bin."})
    assert moving.wait(30)
    assert session.abort("operator abort")
    assert session.wait_task(30)
    task = session.snapshot()["task"]
    assert task["status"] == "aborted" and task["finish"]["operator_aborted"] is True
    assert world.stops == 1 and world.gripper_xyz != [0.1, 0.45, 0.1]
    row = next(row for row in task["timeline"] if row["tool"] == "move_to")
    assert row["status"] == "cancelled" and "cancel" in row["error"]
    # The node closed that record and opened a fresh one: a direct call works and lands there.
    state = dashboard.remote.execute_tool("get_state", {})
    assert not state.is_error, state.error
    assert toolkit.config.output_dir.name == "task-002"


def _pending_request(interaction, timeout_s: float = 30.0) -> dict:
    pause = threading.Event()
    for _ in range(int(timeout_s / 0.02)):  # bounded wait until the toolkit node's request is on the page
        pending = interaction.pending()
        if pending:
            return pending[0]
        pause.wait(0.02)
    raise AssertionError(f"no approval request reached the dashboard within {timeout_s} s")


def test_motions_of_a_remote_franka_wait_for_the_dashboard_operator_yes_or_no(nodes):
    toolkit, dashboard = nodes("franka", sim=True, video_fps=0.0, approve_motions=True)
    arm = toolkit.runtime_kwargs["runtime"].arm()
    start_z = arm.state().pose.position[2]
    up = dashboard.remote.submit("move_by", {"dz_m": 0.03})
    request = _pending_request(dashboard.session.interaction)
    assert request["kind"] == "approval" and "move_by" in request["text"] and not up.done()
    dashboard.session.interaction.respond(request["id"], approve=True)
    moved = up.result(timeout=60)
    assert not moved.is_error, moved.error
    raised_z = arm.state().pose.position[2]
    assert abs(raised_z - start_z - 0.03) < 0.005

    down = dashboard.remote.submit("move_by", {"dz_m": -0.03})
    request = _pending_request(dashboard.session.interaction)
    dashboard.session.interaction.respond(request["id"], approve=False)
    refused = down.result(timeout=60)
    assert refused.is_error and "denied" in refused.error
    assert abs(arm.state().pose.position[2] - raised_z) < 0.002  # nothing moved
