"""RosToolkit's check of a remote tool's arguments (rpent_ros/toolkit/tool_schema.py) refuses exactly what the
toolkit node's own validation refuses, naming the same fields, from the published schema alone.

ROS-free: runs wherever the core runs.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rpent.robot.discovery import load_robot
from rpent.tools import Tool, ToolArgumentError
from rpent_ros.toolkit.tool_schema import ArgumentChecker

ROBOTS = ("toy", "franka", "dual_franka", "libero")
FAST = settings(max_examples=40, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow])


def _tools() -> list[Tool]:
    found: dict[int, Tool] = {}
    for robot in ROBOTS:
        for t in load_robot(robot).get_robot_spec().list_tools():
            found.setdefault(id(t), t)
    return list(found.values())


TOOLS = _tools()
JSON_VALUES = [None, True, False, 0, 1, -1, 0.5, -0.5, 2.0, 1e9, "", "x", "0.1", "success", [], [0.0, 0.0, 0.0, 1.0],
               [1, 2], {}, {"a": 1}]


def _edges(schema: dict) -> list:
    out = []
    for branch in schema.get("anyOf", [schema]):
        for key in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
            if key in branch:
                bound = branch[key]
                out += [bound, math.nextafter(bound, -math.inf), math.nextafter(bound, math.inf)]
        out += branch.get("enum", [])
        for key in ("minLength", "maxLength"):
            if key in branch:
                out += ["x" * max(branch[key] - 1, 0), "x" * branch[key], "x" * (branch[key] + 1)]
    return out


@st.composite
def arguments(draw, t: Tool) -> dict:
    properties = t.input_schema.get("properties", {})
    args = {}
    for name, schema in properties.items():
        if draw(st.integers(0, 4)):  # mostly present
            args[name] = draw(st.sampled_from(JSON_VALUES + _edges(schema)))
    if draw(st.integers(0, 5)) == 0:
        args[draw(st.sampled_from(["extra", "X_M", ""]))] = 1
    return args


def _outcome(check, arguments) -> tuple[bool, list[str]]:
    try:
        check(arguments)
    except ToolArgumentError as exc:
        # "invalid arguments for tool 't': a: rule; b: rule" -> the fields named, in order
        return False, [part.split(":")[0] for part in str(exc).split(": ", 1)[1].split("; ")]
    return True, []


@pytest.mark.parametrize("t", TOOLS, ids=[t.name for t in TOOLS])
@FAST
@given(data=st.data())
def test_the_published_schema_refuses_what_the_toolkit_refuses_naming_the_same_fields(t, data):
    checker = ArgumentChecker(t.name, json.loads(json.dumps(t.input_schema)))  # only what travels over ROS
    args = data.draw(arguments(t))
    assert _outcome(checker.check, args) == _outcome(t.validate, args), args


def test_values_json_cannot_carry_are_refused_as_the_toolkit_refuses_them():
    t = next(t for t in TOOLS if t.name == "move_to" and "z_m" in t.input_schema["required"])
    checker = ArgumentChecker(t.name, t.input_schema)
    for odd in (float("nan"), float("inf"), (0.1,), b"0.1", np.float64(0.1), 10**400):
        args = {"x_m": odd, "y_m": 0.1, "z_m": 0.3}
        assert _outcome(checker.check, args) == _outcome(t.validate, args) == (False, ["x_m"]), odd


def _refusal(check, arguments) -> str:
    with pytest.raises(ToolArgumentError) as refused:
        check(arguments)
    return str(refused.value)


def test_values_json_cannot_carry_are_refused_in_the_toolkit_s_words():
    t = next(t for t in TOOLS if t.name == "move_to" and "z_m" in t.input_schema["required"])
    checker = ArgumentChecker(t.name, t.input_schema)
    for odd in ({"x_m": np.float64(0.1), "y_m": 0.1, "z_m": 0.3}, {"x_m": [[float("nan")]], "y_m": 0.1, "z_m": 0.3},
                {1: 0.1, "y_m": 0.1, "z_m": 0.3}, {"x_m": {2: 0.1}, "y_m": 0.1, "z_m": 0.3}):
        assert _refusal(checker.check, odd) == _refusal(t.validate, odd), odd


def test_a_refusal_reads_like_the_toolkit_s():
    toy = {t.name: t for t in load_robot("toy").get_robot_spec().list_tools()}
    checker = ArgumentChecker("move_to", toy["move_to"].input_schema)
    with pytest.raises(ToolArgumentError) as refused:
        checker.check({"x_m": 5, "speed": 1})
    assert str(refused.value) == (
        "invalid arguments for tool 'move_to': x_m: Input should be less than or equal to 0.6 (got 5); "
        "y_m: required argument is missing; speed: unknown argument (allowed: x_m, y_m, z_m)")
    finish = ArgumentChecker("finish", toy["finish"].input_schema)
    with pytest.raises(ToolArgumentError, match=r"status: Input should be 'success' or 'failure' \(got 'done'\)"):
        finish.check({"status": "done", "summary": "ok"})
    assert checker.check('{"x_m": 0.1, "y_m": 0.2}') == {"x_m": 0.1, "y_m": 0.2}
    for text, rule in (("{x_m: 1", "not valid JSON"), ("[0.1]", "must be a JSON object, got list")):
        with pytest.raises(ToolArgumentError, match=rule):
            checker.check(text)
