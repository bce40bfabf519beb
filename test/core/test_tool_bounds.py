"""with_bounds narrows a tool's numeric parameters to limits known at run time: the schema and the
validation change together, and a bound only ever narrows what the tool itself declares."""

from __future__ import annotations

from typing import Annotated, Any

import pytest
from pydantic import Field

from rpent.tools import ToolArgumentError, ToolContext, readonly, tool
from rpent.tools.bounds import Bounds, with_bounds
from rpent.tools.tool import ToolDefinitionError

Coordinate = Annotated[float, Field(ge=-1.0, le=1.0)]


@tool(outcome=["reached"])
def reach(x_m: Coordinate, speed: Annotated[float, Field(gt=0.0, le=1.0)] | None = None, label: str = "a", *,
          ctx: ToolContext[Any]) -> dict[str, Any]:
    """Reach a point.

    Args:
        x_m: Target x in metres.
        speed: Fraction of full speed.
        label: A name.
    """
    return {"reached": True}


def test_the_schema_and_the_validation_take_the_bounds():
    narrowed = with_bounds(reach, {"x_m": Bounds(ge=0.3, le=0.7), "speed": Bounds(gt=0.0, le=0.3)})
    x = narrowed.input_schema["properties"]["x_m"]
    assert (x["minimum"], x["maximum"], x["description"]) == (0.3, 0.7, "Target x in metres.")
    speed = narrowed.input_schema["properties"]["speed"]
    assert speed["anyOf"][0] == {"exclusiveMinimum": 0.0, "maximum": 0.3, "type": "number"}
    assert speed["anyOf"][1] == {"type": "null"} and speed["default"] is None  # still optional
    assert narrowed.validate({"x_m": 0.5, "speed": 0.2}).x_m == 0.5
    with pytest.raises(ToolArgumentError, match=r"x_m: Input should be less than or equal to 0.7 \(got 0.8\)"):
        narrowed.validate({"x_m": 0.8})
    with pytest.raises(ToolArgumentError, match=r"speed: Input should be less than or equal to 0\.3"):
        narrowed.validate({"x_m": 0.5, "speed": 0.5})
    assert narrowed.outcome == ("reached",) and narrowed.name == "reach" and narrowed.description == reach.description
    assert reach.input_schema["properties"]["x_m"]["maximum"] == 1.0  # the declared tool is unchanged


def test_a_bound_never_widens_the_declared_range():
    wider = with_bounds(reach, {"x_m": Bounds(ge=-5.0, le=0.5), "speed": Bounds(ge=0.0, le=2.0)})
    x = wider.input_schema["properties"]["x_m"]
    assert (x["minimum"], x["maximum"]) == (-1.0, 0.5)
    speed = wider.input_schema["properties"]["speed"]["anyOf"][0]
    assert speed == {"exclusiveMinimum": 0.0, "maximum": 1.0, "type": "number"}  # the tighter, exclusive, lower bound


def test_parameters_the_tool_lacks_are_ignored_and_non_numbers_refused():
    assert with_bounds(reach, {"y_m": Bounds(ge=0.0)}) is reach
    with pytest.raises(ToolDefinitionError, match="only a number or an optional number can be bounded"):
        with_bounds(reach, {"label": Bounds(ge=0.0)})


def test_a_read_only_tool_stays_read_only():
    @tool
    @readonly
    def look(angle: float = 0.0, *, ctx: ToolContext[Any]) -> dict[str, Any]:
        """Look somewhere.

        Args:
            angle: Where.
        """
        return {}

    assert with_bounds(look, {"angle": Bounds(ge=-1.0, le=1.0)}).readonly is True
