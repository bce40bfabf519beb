"""The ToolkitAPI contract (rpent/tools/api.py) as cases that every implementation passes alike.

Run against the in-process Toolkit of the toy robot (test/core/test_toolkit_conformance.py), and against
RosToolkit and RemoteTask, the dashboard's per-task toolkit, both reaching a toy toolkit_node
(test/ros/test_toolkit_conformance_rclpy.py). Every case gets a fresh toolkit whose toy gripper starts
at START and moves at SPEED_M_S, with a record of its own.
"""

from __future__ import annotations

import inspect
import json
import threading
from collections.abc import Callable
from typing import Any

from rpent.tools.api import CallHandle, ToolInfo, ToolkitAPI

#: Slow enough that a move across the table (about 9 s) still runs whenever a case cancels it.
SPEED_M_S = 0.05
START = [0.3, 0.3, 0.2]
NEAR = {"x_m": 0.3, "y_m": 0.31, "z_m": 0.2}  # 1 cm: 0.2 s
FAR = {"x_m": 0.0, "y_m": 0.0, "z_m": 0.0}
WAIT_S = 60.0

Case = Callable[[ToolkitAPI], None]
CASES: list[Case] = []


def case(fn: Case) -> Case:
    CASES.append(fn)
    return fn


class Stages:
    """An on_stage listener that remembers the stages and lets a case wait for one."""

    def __init__(self) -> None:
        self.seen: list[str] = []
        self._changed = threading.Condition()

    def __call__(self, stage: str, message: str, progress: float | None) -> None:
        with self._changed:
            self.seen.append(stage)
            self._changed.notify_all()

    def wait_for(self, stage: str, timeout: float = WAIT_S) -> bool:
        with self._changed:
            return self._changed.wait_for(lambda: stage in self.seen, timeout)


def gripper(toolkit: ToolkitAPI) -> list[float]:
    result = toolkit.execute_tool("get_state", {})
    assert not result.is_error, result.error
    return result.data["gripper_xyz_m"]


def running_far(toolkit: ToolkitAPI) -> CallHandle:
    """A long motion, once it runs."""
    stages = Stages()
    call = toolkit.submit("move_to", FAR, on_stage=stages)
    assert stages.wait_for("running"), f"the motion never ran: {stages.seen}, {call.result(0) if call.done() else ''}"
    return call


def missing_parameters(implementation: Any) -> list[str]:
    """Each ToolkitAPI method whose implementation does not take the protocol's parameters by the same names."""
    missing = []
    for name, member in vars(ToolkitAPI).items():
        if name.startswith("_") or not inspect.isfunction(member):
            continue
        wanted = [p for p in inspect.signature(member).parameters.values() if p.name != "self"]
        offered = inspect.signature(getattr(implementation, name)).parameters
        for parameter in wanted:
            own = offered.get(parameter.name)
            if own is None or (parameter.default is not inspect.Parameter.empty and own.default is inspect.Parameter.empty):
                missing.append(f"{name}({parameter.name})")
    return missing


@case
def offers_every_member_of_the_api(toolkit: ToolkitAPI) -> None:
    assert isinstance(toolkit, ToolkitAPI)
    assert missing_parameters(toolkit) == []
    assert toolkit.closed is False


@case
def lists_every_tool_with_its_schema_and_readonly_flag(toolkit: ToolkitAPI) -> None:
    tools = {t.name: t for t in toolkit.list_tools()}
    assert {"move_to", "grasp", "release", "get_state", "capture_image", "observe", "finish", "read_image"} <= set(tools)
    assert all(isinstance(t, ToolInfo) for t in tools.values())
    assert tools["get_state"].readonly and not tools["move_to"].readonly
    assert tools["move_to"].input_schema["required"] == ["x_m", "y_m"]
    assert tools["move_to"].to_dict()["name"] == "move_to" and tools["move_to"].description
    assert "read_image" not in {t.name for t in toolkit.list_tools(include_read_image=False)}
    found = toolkit.get_tool("move_to")
    assert found is not None and found.name == "move_to"
    assert toolkit.get_tool("no_such_tool") is None


@case
def a_read_returns_the_robot_state(toolkit: ToolkitAPI) -> None:
    result = toolkit.execute_tool("get_state", {})
    assert not result.is_error, result.error
    assert result.data["gripper_xyz_m"] == START and result.data["gripper_open"] is True


@case
def a_motion_moves_the_robot_and_reports_its_stages(toolkit: ToolkitAPI) -> None:
    stages = Stages()
    call = toolkit.submit("move_to", NEAR, on_stage=stages)
    assert isinstance(call, CallHandle) and call.name == "move_to" and isinstance(call.id, int)
    result = call.result(timeout=WAIT_S)
    assert not result.is_error, result.error
    assert call.done() and call.stage == "done"
    assert result.data["gripper_xyz_m"][:2] == [NEAR["x_m"], NEAR["y_m"]]  # the observation after the motion
    assert len(result.images) == 1 and result.images[0][:4] == b"\x89PNG"
    assert stages.wait_for("done") and "running" in stages.seen and stages.seen[-1] == "done"
    assert gripper(toolkit)[:2] == [NEAR["x_m"], NEAR["y_m"]]


@case
def a_listener_hears_running_before_the_tools_own_stage(toolkit: ToolkitAPI) -> None:
    # The toy's move_to reports "moving" the moment it starts, as the Franka's motions do; over ROS that
    # replaced "running" before the first feedback could go out, and a client waiting for "running" waited
    # for ever (test_launch_rclpy's Ctrl-C case, on a quiet machine).
    stages = Stages()
    call = toolkit.submit("move_to", FAR, on_stage=stages)
    assert stages.wait_for("moving"), stages.seen
    call.cancel()
    call.result(timeout=WAIT_S)
    assert "running" in stages.seen and stages.seen.index("running") < stages.seen.index("moving"), stages.seen


@case
def a_bad_argument_is_refused_before_anything_moves(toolkit: ToolkitAPI) -> None:
    result = toolkit.execute_tool("move_to", {"x_m": 5, "y_m": 0.1})
    assert result.is_error and "x_m" in result.error and "less than or equal to 0.6" in result.error
    unknown = toolkit.submit("fly", {}).result(timeout=WAIT_S)
    assert unknown.is_error and "unknown tool 'fly'" in unknown.error
    assert gripper(toolkit) == START


@case
def cancel_stops_a_running_motion_short_of_its_target(toolkit: ToolkitAPI) -> None:
    call = running_far(toolkit)
    assert call.cancel("conformance stop")
    result = call.result(timeout=WAIT_S)
    assert result.is_error and result.error.startswith("cancelled"), result.error
    assert not call.cancel("again")  # it has ended
    assert gripper(toolkit) != [FAR["x_m"], FAR["y_m"], FAR["z_m"]]


@case
def cancel_by_id_drops_a_queued_call_and_leaves_the_running_one(toolkit: ToolkitAPI) -> None:
    moving = running_far(toolkit)
    queued = toolkit.submit("move_to", NEAR)
    assert toolkit.cancel(queued.id, "not needed")
    result = queued.result(timeout=WAIT_S)
    assert result.is_error and "cancelled before it started" in result.error, result.error
    assert not moving.done()
    assert not toolkit.cancel(queued.id)  # it has ended
    assert not toolkit.cancel(987654)  # no such call
    assert moving.cancel()
    assert moving.result(timeout=WAIT_S).is_error
    assert gripper(toolkit)[:2] != [NEAR["x_m"], NEAR["y_m"]]  # the queued motion never ran


@case
def cancel_active_and_wait_ends_running_and_queued_calls(toolkit: ToolkitAPI) -> None:
    moving = running_far(toolkit)
    queued = toolkit.submit("move_to", NEAR)
    assert toolkit.cancel_active_and_wait(timeout=WAIT_S, reason="operator stop")
    assert moving.done() and queued.done()
    assert moving.result(0).error.startswith("cancelled"), moving.result(0).error
    assert "cancelled before it started" in queued.result(0).error, queued.result(0).error
    toolkit.resume_calls()  # calls are admitted again
    assert gripper(toolkit)[:2] != [NEAR["x_m"], NEAR["y_m"]]


@case
def finish_sets_the_finish_result_and_solved_gives_the_robots_verdict(toolkit: ToolkitAPI) -> None:
    assert toolkit.finish_result is None
    result = toolkit.execute_tool("finish", {"status": "success", "summary": "moved nothing"})
    assert not result.is_error, result.error
    assert toolkit.finish_result is not None
    assert toolkit.finish_result["status"] == "success" and toolkit.finish_result["summary"] == "moved nothing"
    assert toolkit.solved() is False  # the red block is not in the bin


@case
def write_recipe_keeps_the_successful_robot_calls(toolkit: ToolkitAPI) -> None:
    assert not toolkit.execute_tool("move_to", NEAR).is_error
    assert toolkit.execute_tool("move_to", {"x_m": 5, "y_m": 0.1}).is_error  # refused: not a step
    assert not toolkit.execute_tool("get_state", {}).is_error
    path = toolkit.write_recipe("conformance")
    assert path.name == "recipe_conformance.jsonl"
    steps = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    assert [(s["tool"], s["arguments"]) for s in steps] == [("move_to", NEAR), ("get_state", {})]


@case
def close_refuses_every_later_call(toolkit: ToolkitAPI) -> None:
    assert not toolkit.execute_tool("get_state", {}).is_error
    toolkit.close(timeout=WAIT_S)
    assert toolkit.closed
    refused = toolkit.execute_tool("get_state", {})
    assert refused.is_error and "closed" in refused.error, refused.error
    submitted = toolkit.submit("move_to", NEAR).result(timeout=WAIT_S)
    assert submitted.is_error and "closed" in submitted.error, submitted.error
    toolkit.close(timeout=WAIT_S)  # a second close changes nothing
    assert toolkit.closed
