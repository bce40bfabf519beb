"""The ROS-free half of rpent_ros: goal parsing, result/feedback/event mapping, parameters -> config."""

from __future__ import annotations

import json

import numpy as np
import pytest

from robots.toy.robot_spec import get_robot_spec
from rpent.robot import ConfigError
from rpent.tools import ToolResult
from rpent.tools.images import encode_png
from rpent_ros.params import namespace_from_params
from rpent_ros.toolkit.conversions import (
    GoalError,
    event_fields,
    feedback_fields,
    parse_goal,
    result_fields,
    result_from_fields,
    tools_json,
)


def test_generic_goal_names_its_tool_and_arguments():
    goal = parse_goal("move_to", '{"x_m": 0.1, "y_m": 0.2}')
    assert goal.tool == "move_to" and goal.arguments == {"x_m": 0.1, "y_m": 0.2}
    assert parse_goal("get_state", "").arguments == {}


def test_per_tool_goal_may_leave_the_tool_empty_but_not_name_another():
    assert parse_goal("", "{}", served_tool="get_state").tool == "get_state"
    assert parse_goal("get_state", "{}", served_tool="get_state").tool == "get_state"
    with pytest.raises(GoalError, match="this action serves 'get_state', the goal names 'move_to'"):
        parse_goal("move_to", "{}", served_tool="get_state")


@pytest.mark.parametrize(
    ("tool", "arguments", "message"),
    [
        ("", "{}", "tool: required"),
        ("move_to", "{x", "arguments_json: not valid JSON"),
        ("move_to", "[1, 2]", "arguments_json: must be a JSON object, got list"),
    ],
)
def test_bad_goals_name_the_field(tool, arguments, message):
    with pytest.raises(GoalError, match=message):
        parse_goal(tool, arguments)


def test_result_round_trips_through_message_fields():
    png = encode_png(np.zeros((4, 5, 3), np.uint8))
    original = ToolResult(data={"pose": [0.1, 0.2]}, images=[png], error="arm stopped")
    fields = result_fields(original)
    assert fields["is_error"] is True and fields["error"] == "arm stopped"
    assert json.loads(fields["result_json"]) == {"pose": [0.1, 0.2], "error": "arm stopped"}
    assert fields["images"] == [("png", png)]
    back = result_from_fields(**fields)
    assert back.data == {"pose": [0.1, 0.2]} and back.error == "arm stopped" and back.images == [png]
    ok = result_from_fields(**result_fields(ToolResult(data={"a": 1})))
    assert not ok.is_error and ok.data == {"a": 1}


def test_tools_json_lists_schema_and_readonly():
    tools = json.loads(tools_json(get_robot_spec().list_tools()))
    by_name = {t["name"]: t for t in tools}
    assert by_name["get_state"]["readonly"] is True and by_name["move_to"]["readonly"] is False
    assert by_name["move_to"]["input_schema"]["required"] == ["x_m", "y_m"]


def test_feedback_and_event_fields():
    assert feedback_fields("running") == {"stage": "running", "message": "", "progress": -1.0}
    assert feedback_fields("running", "half", 0.5)["progress"] == 0.5
    event = event_fields("tool_finished", {"call_id": 3, "tool": "grasp", "error": None})
    assert event["kind"] == "tool_finished" and event["call_id"] == 3 and event["tool"] == "grasp"
    assert json.loads(event["payload_json"])["call_id"] == 3


def test_parameters_map_onto_the_robots_flags(tmp_path):
    spec = get_robot_spec()
    namespace = namespace_from_params(spec, {"robot": "toy", "speed": 0.25, "output_dir": str(tmp_path), "task": "stack"})
    config = spec.parse_config(namespace)
    assert config.options["speed_m_s"] == 0.25 and config.task == "stack" and config.output_dir == tmp_path


def test_parameter_errors_name_the_parameter_and_the_rule(tmp_path):
    spec = get_robot_spec()
    with pytest.raises(ConfigError, match="parameter warp: not a flag of robot 'toy'"):
        namespace_from_params(spec, {"warp": 9})
    with pytest.raises(ConfigError, match="parameter planner: must be one of"):
        namespace_from_params(spec, {"planner": "oracle"})
    with pytest.raises(ConfigError, match="parameter speed"):
        namespace_from_params(spec, {"speed": "fast"})
    namespace = namespace_from_params(spec, {"speed": 9.0, "output_dir": str(tmp_path)})
    with pytest.raises(ConfigError, match="--speed: must be > 0 and <= 2"):
        spec.parse_config(namespace)


def test_runtime_values_round_trip_losslessly():
    from rpent.runtime.types import ArmState, MotionOutcome, Pose
    from rpent_ros.runtime.codec import decode_call, decode_result, encode_call, encode_result

    pose = Pose((0.4, -0.1, 0.3), (0.0, 1.0, 0.0, 0.0))
    state = ArmState(pose=pose, joints=(0.0, -0.785, 0.0, -2.356, 0.0, 1.571, 0.785), moving=True)
    assert decode_result(encode_result(state)) == state
    outcome = MotionOutcome(finished=False, stopped=True, detail="cancel", extra={"grasped": True})
    assert decode_result(encode_result(outcome)) == outcome
    args, kwargs = decode_call(encode_call(([pose],), {"speed_factor": 0.2, "image": np.zeros((2, 2, 3), np.uint8)}))
    assert args == [[pose]] and kwargs["speed_factor"] == 0.2
    assert kwargs["image"].dtype == np.uint8 and kwargs["image"].shape == (2, 2, 3)
