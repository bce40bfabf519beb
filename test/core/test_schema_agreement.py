"""Every bundled tool's published `input_schema` and `Tool.validate` accept exactly the same arguments.

For each tool of each bundled robot (listed as `rpent tools --robot X` lists them, without hardware)
hypothesis draws arguments from the schema and near misses of them (bool for a number, numeric
strings, bounds crossed, wrong lengths, missing and extra keys); a Draft 2020-12 validator is the
reference. Python values JSON cannot carry (bytes, Decimal, numpy scalars, NaN, inf, tuples) have no
JSON-Schema verdict, so they are checked on their own: validate must refuse them.
"""

from __future__ import annotations

import enum
import functools
import json
import math
import sys
from collections.abc import Callable
from decimal import Decimal
from typing import Any

import jsonschema
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rpent.robot.discovery import load_robot
from rpent.tools import Tool, ToolArgumentError

ROBOTS = ("toy", "franka", "dual_franka", "libero")
# Keywords the strategies below understand; a tool using another one fails here until they learn it.
KNOWN_KEYWORDS = {
    "type", "anyOf", "enum", "pattern", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
    "minLength", "maxLength", "items", "minItems", "maxItems", "description", "default",
}  # fmt: skip
# Fixed seed, no example database: the same examples every run, nothing written to disk.
FAST = settings(
    max_examples=60, deadline=None, derandomize=True, database=None, suppress_health_check=[HealthCheck.too_slow]
)
FASTER = settings(FAST, max_examples=30)  # the non-JSON values are a short fixed list


def _bundled_tools() -> list[tuple[str, Tool]]:
    found: dict[int, tuple[str, Tool]] = {}
    for robot in ROBOTS:
        for t in load_robot(robot).get_robot_spec().list_tools():
            found.setdefault(id(t), (f"{robot}.{t.name}", t))  # shared tools (read_text_file, ...) once
    return list(found.values())


TOOLS = _bundled_tools()
TOOL_IDS = [name for name, _ in TOOLS]


def _is_json_number(value: Any) -> bool:
    # What JSON carries between programs: IEEE doubles, so no NaN, no inf, no integer beyond their range.
    if type(value) is float:
        return math.isfinite(value)
    return type(value) is int and abs(value) <= sys.float_info.max


def _is_json_integer(value: Any) -> bool:
    # The tools' integers are counts and indices: 1.0 is refused although JSON Schema's value model
    # calls it an integer (issue 12: an integer parameter takes int only).
    return type(value) is int and _is_json_number(value)


_CHECKER = jsonschema.Draft202012Validator.TYPE_CHECKER.redefine_many(
    {"number": lambda _c, v: _is_json_number(v), "integer": lambda _c, v: _is_json_integer(v)}
)
Reference = jsonschema.validators.extend(jsonschema.Draft202012Validator, type_checker=_CHECKER)


def accepts(t: Tool, arguments: dict[Any, Any]) -> bool:
    try:
        t.validate(arguments)
    except ToolArgumentError:
        return False
    return True


def _per_schema(build: Callable[[dict[str, Any]], st.SearchStrategy[Any]]) -> Callable[..., st.SearchStrategy[Any]]:
    """Build each (sub)schema's strategy once; the schemas live as long as their tools."""
    built: dict[int, st.SearchStrategy[Any]] = {}

    @functools.wraps(build)
    def cached(schema: dict[str, Any]) -> st.SearchStrategy[Any]:
        if id(schema) not in built:
            built[id(schema)] = build(schema)
        return built[id(schema)]

    return cached


# --- values that fit a schema ---------------------------------------------------------------


@_per_schema
def valid(schema: dict[str, Any]) -> st.SearchStrategy[Any]:
    unknown = set(schema) - KNOWN_KEYWORDS
    assert not unknown, f"teach test_schema_agreement the keywords {unknown}"
    if "anyOf" in schema:
        return st.one_of([valid(branch) for branch in schema["anyOf"]])
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    if "pattern" in schema:
        return st.from_regex(schema["pattern"])
    return _VALID_BY_TYPE[schema["type"]](schema)


def _valid_number(schema: dict[str, Any]) -> st.SearchStrategy[Any]:
    low = schema.get("minimum", schema.get("exclusiveMinimum"))
    high = schema.get("maximum", schema.get("exclusiveMaximum"))
    floats = st.floats(
        low, high, allow_nan=False, allow_infinity=False,
        exclude_min="exclusiveMinimum" in schema, exclude_max="exclusiveMaximum" in schema,
    )  # fmt: skip
    int_low, int_high = None if low is None else math.ceil(low), None if high is None else math.floor(high)
    if int_low is not None and int_high is not None and int_low > int_high:
        return floats  # no whole number in the range (franka's x_m [0.3, 0.7])
    ints = st.integers(int_low, int_high)
    return floats | ints.filter(lambda i: _within_bounds(schema, i))


def _within_bounds(schema: dict[str, Any], x: float) -> bool:
    return (
        x >= schema.get("minimum", -math.inf)
        and x <= schema.get("maximum", math.inf)
        and x > schema.get("exclusiveMinimum", -math.inf)
        and x < schema.get("exclusiveMaximum", math.inf)
    )


def _valid_integer(schema: dict[str, Any]) -> st.SearchStrategy[Any]:
    return st.integers(schema.get("minimum"), schema.get("maximum"))


def _valid_string(schema: dict[str, Any]) -> st.SearchStrategy[Any]:
    low = schema.get("minLength", 0)
    return st.text(min_size=low, max_size=max(low, min(schema.get("maxLength", 40), 40)))


def _valid_array(schema: dict[str, Any]) -> st.SearchStrategy[Any]:
    return st.lists(valid(schema["items"]), min_size=schema.get("minItems", 0), max_size=schema.get("maxItems", 5))


_VALID_BY_TYPE = {
    "number": _valid_number,
    "integer": _valid_integer,
    "string": _valid_string,
    "boolean": lambda _s: st.booleans(),
    "null": lambda _s: st.none(),
    "array": _valid_array,
}

# --- near misses: what a confused caller sends ------------------------------------------------

_ANY_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=6,
)
_WRONG_TYPES = [None, True, False, 0, 1, -1, 1.0, 0.5, "", "0", "0.1", "1", "true", "null", [], {}, [0.0], {"v": 1}]
_BIG = [2**53 + 1, 10**400, -(10**400), 1e308, 5e-324]


@_per_schema
def near_miss(schema: dict[str, Any]) -> st.SearchStrategy[Any]:
    if "anyOf" in schema:
        return st.one_of([near_miss(branch) for branch in schema["anyOf"]])
    others = _confused(schema) | st.sampled_from(_WRONG_TYPES + _BIG + _edges(schema)) | _ANY_JSON
    if schema.get("type") == "array":
        # Half the time bend the array itself: its items are where lax validation coerced.
        return st.booleans().flatmap(lambda bend: _mangled(schema) if bend else others)
    return others | _mangled(schema)


def _confused(schema: dict[str, Any]) -> st.SearchStrategy[Any]:
    """A valid value in another JSON type: "0.25" or true for 0.25, 3.0 for 3, [v] for v."""
    return st.tuples(valid(schema), st.sampled_from(_RETYPINGS)).map(lambda p: p[1](p[0]))


def _retype_number(value: Any) -> Any:
    if type(value) is int:
        return float(value)
    return int(value) if type(value) is float and value.is_integer() else value


_RETYPINGS = [str, json.dumps, bool, lambda v: [v], lambda v: {"value": v}, _retype_number, lambda v: None]


def _edges(schema: dict[str, Any]) -> list[Any]:
    out: list[Any] = []
    for key in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
        if key in schema:
            bound = schema[key]
            out += [bound, math.nextafter(bound, -math.inf), math.nextafter(bound, math.inf), bound - 1, bound + 1]
            out += [float(bound), str(bound)] + ([int(bound)] if float(bound).is_integer() else [])
    for value in (v for v in schema.get("enum", []) if isinstance(v, str)):
        out += [value.upper(), value.capitalize(), f" {value} ", value + "x", value[:-1], [value], value[:1]]
    for key in ("minLength", "maxLength"):
        if key in schema:
            out += ["x" * (schema[key] - 1), "x" * schema[key], "x" * (schema[key] + 1)]
    return out


def _mangled(schema: dict[str, Any]) -> st.SearchStrategy[Any]:
    """A valid value bent slightly: a string with extra text, an array of the wrong length or item."""
    if schema.get("type") == "array":
        items = valid(schema["items"])
        sizes = [n for n in (schema.get("minItems", 0) - 1, schema.get("maxItems", 5) + 1) if n >= 0]
        wrong_length = st.sampled_from(sizes).flatmap(lambda n: st.lists(items, min_size=n, max_size=n))
        wrong_item = st.tuples(valid(schema), st.integers(0, 10), near_miss(schema["items"])).map(_swap_item)
        return wrong_length | wrong_item
    if "pattern" in schema:
        return st.tuples(valid(schema), st.text(max_size=3)).map(lambda p: p[0] + p[1])
    return st.nothing()


def _swap_item(drawn: tuple[list[Any], int, Any]) -> list[Any]:
    values, index, replacement = drawn
    if not values:
        return [replacement]
    values = list(values)  # leave hypothesis's own value alone
    values[index % len(values)] = replacement
    return values


# --- whole argument objects -------------------------------------------------------------------


@st.composite
def arguments(draw: st.DrawFn, schema: dict[str, Any]) -> dict[str, Any]:
    """Valid arguments, mostly bent one way: a value or two swapped for near misses, a key dropped or added."""
    properties, required = schema["properties"], sorted(schema.get("required", []))
    args = {name: draw(valid(sub)) for name, sub in properties.items() if name in required or draw(st.booleans())}
    bend = draw(st.sampled_from(["none", "one value", "one value", "two values", "drop", "extra"]))
    if bend.endswith(("value", "values")) and properties:
        count = 1 if bend.startswith("one") else 2
        for name in draw(st.sets(st.sampled_from(sorted(properties)), min_size=1, max_size=count)):
            args[name] = draw(near_miss(properties[name]))
    elif bend == "drop" and required:
        del args[draw(st.sampled_from(required))]
    elif bend == "extra":
        args[draw(st.sampled_from(["ctx", "extra", "X_M", ""]) | st.text(max_size=6))] = draw(_ANY_JSON)
    return args


@pytest.mark.parametrize("t", [t for _, t in TOOLS], ids=TOOL_IDS)
def test_every_published_schema_is_a_valid_draft_2020_12_schema(t: Tool):
    jsonschema.Draft202012Validator.check_schema(t.input_schema)


WITH_PARAMETERS = [(name, t) for name, t in TOOLS if t.input_schema["properties"]]
WITHOUT_PARAMETERS = [(name, t) for name, t in TOOLS if not t.input_schema["properties"]]


@pytest.mark.parametrize("t", [t for _, t in WITHOUT_PARAMETERS], ids=[n for n, _ in WITHOUT_PARAMETERS])
@pytest.mark.parametrize("args", [{}, {"x": 1}, {"ctx": None}, {"": None}], ids=repr)
def test_a_tool_without_parameters_takes_only_the_empty_object(t: Tool, args: dict[str, Any]):
    assert accepts(t, args) == Reference(t.input_schema).is_valid(args) == (args == {})


@pytest.mark.parametrize("t", [t for _, t in WITH_PARAMETERS], ids=[n for n, _ in WITH_PARAMETERS])
@FAST
@given(data=st.data())
def test_validate_accepts_exactly_what_the_schema_accepts(t: Tool, data: st.DataObject):
    args = data.draw(arguments(t.input_schema), label="arguments")
    expected = Reference(t.input_schema).is_valid(args)
    assert accepts(t, args) == expected, f"schema says {'valid' if expected else 'invalid'}: {args!r}"


class _Level(enum.IntEnum):
    ONE = 1


class _Text(str):
    pass


class _Real(float):
    pass


_NOT_JSON = [
    b"0.1", bytearray(b"1"), Decimal("0.1"), Decimal(1), np.float64(0.1), np.float32(0.5), np.int64(1), np.int32(0),
    np.bool_(True), np.str_("left"), np.array([0.0]), float("nan"), float("inf"), float("-inf"), _Level.ONE,
    _Text("success"), _Real(0.1), (0.0,), {0.0}, object(), 1j,
]  # fmt: skip


@st.composite
def non_json_arguments(draw: st.DrawFn, schema: dict[str, Any]) -> dict[str, Any]:
    """Valid arguments with one value, or one array item, swapped for something JSON cannot carry."""
    properties = schema["properties"]
    args = {name: draw(valid(sub)) for name, sub in properties.items()}
    name = draw(st.sampled_from(sorted(properties)))
    bad = draw(st.sampled_from(_NOT_JSON))
    if isinstance(args[name], list) and args[name] and draw(st.booleans()):
        args[name] = _swap_item((args[name], draw(st.integers(0, 10)), bad))
    else:
        args[name] = bad
    return args


@pytest.mark.parametrize("t", [t for _, t in WITH_PARAMETERS], ids=[n for n, _ in WITH_PARAMETERS])
@FASTER
@given(data=st.data())
def test_values_json_cannot_carry_are_refused(t: Tool, data: st.DataObject):
    args = data.draw(non_json_arguments(t.input_schema), label="arguments")
    assert not accepts(t, args), f"took a non-JSON value: {args!r}"


def test_the_strategies_do_reach_both_verdicts():
    # Guard against a generator that only ever produces valid (or only invalid) arguments.
    verdicts: set[bool] = set()

    @settings(max_examples=60, deadline=None, derandomize=True, database=None)
    @given(data=st.data())
    def sample(data: st.DataObject) -> None:
        t = dict(TOOLS)["franka.move_to"]
        verdicts.add(Reference(t.input_schema).is_valid(data.draw(arguments(t.input_schema))))

    sample()
    assert verdicts == {True, False}
