"""@tool / @readonly: schema derivation, validation messages, decoration-time errors."""

from __future__ import annotations

from typing import Annotated, Any, Literal

import pytest
from pydantic import Field

from rpent.tools import Tool, ToolArgumentError, ToolContext, ToolDefinitionError, readonly, tool


@tool
def move_to(
    x_m: Annotated[float, Field(ge=-1.0, le=1.0)],
    y_m: float = Field(0.0, ge=-1.0, le=1.0),
    frame: Literal["base", "tool"] = "base",
    note: str | None = None,
    *,
    ctx: ToolContext[Any],
) -> dict[str, Any]:
    """Move the end effector to a position.

    The position is in the robot base frame.

    Args:
        x_m: Target x in metres,
            measured forward.
        y_m: Target y in metres.
        frame: Which frame the target is in.
        note: Free text kept in the log.
    """
    return {"x": x_m, "y": y_m, "frame": frame, "note": note}


def test_name_description_and_parameter_docs_come_from_the_function():
    assert isinstance(move_to, Tool)
    assert move_to.name == "move_to"
    assert move_to.description == "Move the end effector to a position.\n\nThe position is in the robot base frame."
    props = move_to.input_schema["properties"]
    assert props["x_m"]["description"] == "Target x in metres, measured forward."
    assert props["y_m"]["description"] == "Target y in metres."
    assert move_to.readonly is False


def test_schema_forbids_extra_properties_and_hides_ctx():
    schema = move_to.input_schema
    assert schema["type"] == "object"
    assert schema["additionalProperties"] is False
    assert schema["required"] == ["x_m"]
    assert "ctx" not in schema["properties"]
    assert "title" not in schema


def test_constraints_from_annotated_and_field_default_reach_the_schema():
    props = move_to.input_schema["properties"]
    assert props["x_m"]["minimum"] == -1.0 and props["x_m"]["maximum"] == 1.0
    y_number = next(s for s in props["y_m"]["anyOf"] if s.get("type") == "number")
    assert y_number["minimum"] == -1.0 and y_number["maximum"] == 1.0
    assert props["y_m"]["default"] == 0.0


def test_omittable_parameters_accept_null_and_null_means_the_default():
    assert {"type": "null"} in move_to.input_schema["properties"]["y_m"]["anyOf"]
    model = move_to.validate({"x_m": 0.5, "y_m": None, "frame": None})
    assert model.y_m == 0.0 and model.frame == "base"
    # A parameter whose own type admits None keeps None.
    assert move_to.validate({"x_m": 0.1, "note": None}).note is None


def test_validation_error_names_the_field_and_the_rule():
    with pytest.raises(ToolArgumentError) as info:
        move_to.validate({"x_m": 3.0})
    message = str(info.value)
    assert "move_to" in message and "x_m" in message and "less than or equal to 1" in message


def test_missing_and_unknown_arguments_are_named():
    with pytest.raises(ToolArgumentError) as info:
        move_to.validate({"speed": 2})
    message = str(info.value)
    assert "x_m: required argument is missing" in message
    assert "speed: unknown argument" in message


def test_constraint_in_field_default_is_enforced():
    with pytest.raises(ToolArgumentError, match="y_m"):
        move_to.validate({"x_m": 0.0, "y_m": -5})


def test_caller_supplied_ctx_is_rejected():
    with pytest.raises(ToolArgumentError, match="'ctx' is supplied by the executor"):
        move_to.validate({"x_m": 0.0, "ctx": {}})


def test_readonly_below_tool_marks_the_tool():
    @tool
    @readonly
    def look(*, ctx: ToolContext[Any]) -> dict[str, Any]:
        """Look."""
        return {}

    assert look.readonly is True


def test_tool_without_ctx_fails_at_decoration():
    with pytest.raises(ToolDefinitionError, match="ctx"):

        @tool
        def bad(x: int) -> None:
            """Bad."""


def test_positional_ctx_fails_at_decoration():
    with pytest.raises(ToolDefinitionError, match="keyword-only"):

        @tool
        def bad(x: int, ctx: ToolContext[Any]) -> None:
            """Bad."""


def test_ctx_with_wrong_annotation_fails_at_decoration():
    with pytest.raises(ToolDefinitionError, match="ToolContext"):

        @tool
        def bad(*, ctx: dict) -> None:
            """Bad."""


def test_untyped_parameter_fails_at_decoration_naming_it():
    with pytest.raises(ToolDefinitionError, match="'speed' has no type annotation"):

        @tool
        def bad(speed, *, ctx: ToolContext[Any]) -> None:  # type: ignore[no-untyped-def]
            """Bad."""


def test_var_keyword_parameters_fail_at_decoration():
    with pytest.raises(ToolDefinitionError, match=r"\*\*kwargs"):

        @tool
        def bad(*, ctx: ToolContext[Any], **extra: int) -> None:
            """Bad."""


def test_missing_docstring_fails_at_decoration():
    with pytest.raises(ToolDefinitionError, match="docstring"):

        @tool
        def bad(*, ctx: ToolContext[Any]) -> None:
            pass


def test_forward_reference_in_ctx_annotation_is_accepted():
    @tool
    def later(x: int, *, ctx: ToolContext[NotDefinedAnywhere]) -> None:  # noqa: F821
        """Later."""

    assert later.input_schema["properties"]["x"]["type"] == "integer"


def test_tool_stays_callable_as_a_function():
    assert move_to(0.2, ctx=None)["x"] == 0.2  # type: ignore[arg-type]
