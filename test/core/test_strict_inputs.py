"""Issue 12, strict inputs: a tool takes exactly the JSON its schema publishes, nothing pydantic could coerce.

Each test reproduces one finding against the real robot tools: lax validation turned `false` into
x = 0, "0.1" into 0.1, moved the fingers on `"0.0"`, and let bytes, Decimal and numpy scalars reach
the handlers.
"""

from __future__ import annotations

import enum
import json
from decimal import Decimal
from pathlib import Path
from typing import Annotated, Any, Literal

import jsonschema
import numpy as np
import pytest
from pydantic import BaseModel, Field

from robots.dual_franka import tools as dual
from robots.franka import tools as franka
from robots.libero import tools as libero
from robots.toy import tools as toy
from rpent.tools import ToolArgumentError, ToolContext, ToolDefinitionError, tool

POSE = {"x_m": 0.4, "y_m": 0.0, "z_m": 0.3}


def refused(t, arguments: dict[str, Any]) -> str:
    with pytest.raises(ToolArgumentError) as info:
        t.validate(arguments)
    return str(info.value)


def test_false_is_not_the_number_zero():
    message = refused(franka.move_to, {**POSE, "x_m": False})
    assert "x_m" in message and "valid number" in message


@pytest.mark.parametrize("text", ["0.1", "0", " 0.1", "1e-1"])
def test_numeric_strings_are_not_numbers(text):
    message = refused(franka.move_to, {**POSE, "x_m": text})
    assert "x_m" in message and "valid number" in message


def test_grasp_does_not_read_a_string_width():
    assert "width_m" in refused(franka.grasp, {"width_m": "0.0"})
    assert "force_n" in refused(franka.grasp, {"force_n": "20"})


@pytest.mark.parametrize(
    "value",
    [b"0.1", bytearray(b"0.1"), Decimal("0.1"), np.float64(0.1), np.float32(0.1), np.int64(0), np.bool_(False)],
    ids=repr,
)
def test_non_json_python_values_never_reach_a_handler(value):
    message = refused(franka.move_to, {**POSE, "x_m": value})
    assert "x_m" in message and "JSON" in message and type(value).__name__ in message


@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf"), 10**400], ids=repr)
def test_non_finite_numbers_are_refused_everywhere(value):
    # Bounded fields refused NaN by accident of comparison; unbounded list items took it.
    assert "x_m" in refused(franka.move_to, {**POSE, "x_m": value})
    assert "joints_rad.3" in refused(franka.move_joints, {"joints_rad": [0.0, 0.0, 0.0, value, 0.0, 0.0, 0.0]})
    assert "quaternion_xyzw.0" in refused(franka.move_to, {**POSE, "quaternion_xyzw": [value, 0.0, 0.0, 1.0]})


def test_nan_from_a_json_text_is_refused():
    # Python's json module reads the non-JSON tokens NaN and Infinity as floats.
    arguments = json.loads('{"x_m": NaN, "y_m": Infinity, "z_m": 0.3}')
    message = refused(franka.move_to, arguments)
    assert "x_m" in message and "finite" in message


@pytest.mark.parametrize("value", [True, 1.0, 120.0, "120", np.int64(120)], ids=repr)
def test_integers_take_int_only(value):
    message = refused(libero.move_to, {**POSE, "max_steps": value})
    assert "max_steps" in message


def test_integers_still_take_int_and_numbers_take_int():
    assert libero.move_to.validate({**POSE, "max_steps": 120}).max_steps == 120
    model = franka.move_to.validate({"x_m": 0, "y_m": 1, "z_m": -1})
    assert (model.x_m, model.y_m, model.z_m) == (0.0, 1.0, -1.0)
    assert type(model.x_m) is float


@pytest.mark.parametrize("value", [b"done", np.str_("done"), 7, ["done"]], ids=repr)
def test_strings_take_str_only(value):
    assert "summary" in refused(toy.finish, {"status": "success", "summary": value})


@pytest.mark.parametrize("value", [np.str_("success"), b"success"], ids=repr)
def test_enum_strings_take_str_only(value):
    assert "status" in refused(toy.finish, {"status": value, "summary": "done"})


@pytest.mark.parametrize("value", [1, 0, "true", np.bool_(True)], ids=repr)
def test_booleans_take_bool_only(value):
    assert "with_images" in refused(libero.run_vla, {"with_images": value})


def test_arrays_are_json_lists_not_tuples():
    joints = [0.0, -0.7, 0.0, -2.3, 0.0, 1.6, 0.8]
    assert franka.move_joints.validate({"joints_rad": joints}).joints_rad == joints
    assert "joints_rad" in refused(franka.move_joints, {"joints_rad": tuple(joints)})
    assert "joints_rad" in refused(franka.move_joints, {"joints_rad": np.array(joints)})
    assert "joints_rad.2" in refused(franka.move_joints, {"joints_rad": [0.0, 0.0, "0.0", 0.0, 0.0, 0.0, 0.0]})


@tool
def annotate(meta: dict[str, Any] | None = None, *, ctx: ToolContext[Any]) -> dict[str, Any]:
    """Attach free-form metadata.

    Args:
        meta: Key/value notes.
    """
    return {"meta": meta}


def test_objects_are_dicts_with_string_keys_and_json_values():
    assert annotate.validate({"meta": {"a": [1, 2.5, None, True, {"b": "c"}]}}).meta["a"][4] == {"b": "c"}
    assert "meta" in refused(annotate, {"meta": {1: "x"}})
    assert "meta.a.0" in refused(annotate, {"meta": {"a": [Decimal(1)]}})
    assert "meta.a" in refused(annotate, {"meta": {"a": float("nan")}})


def test_argument_names_must_be_strings():
    assert "argument names" in refused(annotate, {1: "x"})


def test_null_still_means_the_default_and_unknown_arguments_are_refused():
    model = franka.grasp.validate({"width_m": None, "force_n": None})
    assert (model.width_m, model.force_n) == (0.0, 20.0)
    assert "grip: unknown argument" in refused(franka.grasp, {"grip": 1.0})
    assert "x_m: required argument is missing" in refused(franka.move_to, {"y_m": 0.0, "z_m": 0.3})


@pytest.mark.parametrize("spelling", ["left", "L", "l", "LEFT", "Left", " left ", "r", "R", "Right"])
def test_arm_aliases_are_accepted_and_the_schema_says_so(spelling):
    arguments = {"arm": spelling, "width_m": 0.04}
    assert dual.move_gripper.validate(arguments).arm in ("left", "right")
    jsonschema.Draft202012Validator(dual.move_gripper.input_schema).validate(arguments)
    assert dual.home.validate({"arm": spelling}).arm in ("left", "right")


@pytest.mark.parametrize("spelling", ["middle", "", "lef", "ll", 0, True, b"left", np.str_("left")], ids=repr)
def test_other_arm_names_are_refused_by_both(spelling):
    arguments = {"arm": spelling, "width_m": 0.04}
    assert "arm" in refused(dual.move_gripper, arguments)
    if not isinstance(spelling, (bytes, np.str_)):
        assert not jsonschema.Draft202012Validator(dual.move_gripper.input_schema).is_valid(arguments)


def test_the_arm_schema_still_lists_the_canonical_names():
    arm = dual.move_gripper.input_schema["properties"]["arm"]
    assert {"enum": ["left", "right"], "type": "string"} in arm["anyOf"]


def _tool_taking(annotation: Any) -> Any:
    def paint(value, *, ctx):  # annotated below: the annotation is a variable
        """Paint."""

    paint.__annotations__ = {"value": annotation, "ctx": ToolContext[Any], "return": None}
    return tool(paint)


class Colour(enum.Enum):
    RED = "red"


@pytest.mark.parametrize("annotation", [tuple[float, float], Colour, Path, bytes, set[str], dict[int, str]], ids=repr)
def test_a_parameter_type_json_cannot_carry_fails_at_decoration(annotation):
    # Strict validation takes these only as Python objects, so every JSON call would be refused.
    with pytest.raises(ToolDefinitionError, match="cannot arrive as JSON"):
        _tool_taking(annotation)


@pytest.mark.parametrize("annotation", [float, list[int] | None, dict[str, list[str]], Literal["a", 1, None], Any])
def test_json_types_make_tools(annotation):
    assert _tool_taking(annotation).name == "paint"


class Point(BaseModel):
    x_m: Annotated[float, Field(ge=-1.0, le=1.0)]
    frame: Literal["base", "tool"] = "base"


@tool
def visit(points: list[Point], *, ctx: ToolContext[Any]) -> dict[str, Any]:
    """Visit points in turn.

    Args:
        points: Where to go.
    """
    return {"n": len(points)}


def test_nested_objects_are_strict_too():
    assert visit.validate({"points": [{"x_m": 0.5}]}).points[0].x_m == 0.5
    assert "points.0.x_m" in refused(visit, {"points": [{"x_m": "0.5"}]})
    assert "points.0.x_m" in refused(visit, {"points": [{"x_m": True}]})


def test_toy_move_to_refuses_what_lax_mode_coerced():
    for bad in (False, "0.1", Decimal("0.1"), np.float64(0.1)):
        assert "x_m" in refused(toy.move_to, {"x_m": bad, "y_m": 0.1})
    assert toy.move_to.validate({"x_m": 0.1, "y_m": 0.2}).z_m == 0.1
