"""Tool arguments as JSON carries them: what a JSON text could not have held, and how a refusal words
each problem (the field, the rule, the value given). One wording for the in-process check
(rpent.tools.tool.Tool.validate) and RosToolkit's check against a published schema."""

from __future__ import annotations

import math
import reprlib
import sys
from collections.abc import Iterator, Mapping
from typing import Any

JSON_SCALARS = (str, int, float, bool, type(None))
_NOT_JSON = "Input should be a JSON value (number, string, boolean, null, array or object), not {}"
# Arrays and objects nested deeper than this are refused before validation: no tool schema needs it,
# and Python's recursion limit (JSON parsing, validation, repr) would otherwise decide what happens.
MAX_ARGUMENT_DEPTH = 100
# Error texts quote the offending input; a bounded repr keeps a 9 MB or 5,000-deep value from
# becoming the message.
_INPUT_REPR = reprlib.Repr()
_INPUT_REPR.maxlevel, _INPUT_REPR.maxstring, _INPUT_REPR.maxother = 4, 200, 200
_INPUT_REPR.maxlist = _INPUT_REPR.maxtuple = _INPUT_REPR.maxdict = _INPUT_REPR.maxset = 10


def describe_problem(error: Mapping[str, Any], allowed: str) -> str:
    """One problem, in pydantic's error shape, as a refusal reads it: the field, the rule, the value given.

    Public so that a check made elsewhere (RosToolkit's, from the published schema) words it the same.
    """
    field = ".".join(str(part) for part in error["loc"]) or "arguments"
    if error["type"] == "extra_forbidden":
        return f"{field}: unknown argument (allowed: {allowed})"
    if error["type"] == "missing":
        return f"{field}: required argument is missing"
    if "input" not in error:
        return f"{field}: {error['msg']}"
    return f"{field}: {error['msg']} (got {quote_input(error['input'])})"


def quote_input(value: Any) -> str:
    """An offending input as an error message quotes it: bounded, and never an exception of its own."""
    try:
        return _INPUT_REPR.repr(value)
    except Exception:
        return f"<unprintable {type(value).__name__}>"


def json_problems(arguments: Mapping[Any, Any]) -> Iterator[dict[str, Any]]:
    """Errors, in pydantic's shape, for every value a JSON text could not have carried."""
    for key, value in arguments.items():
        if type(key) is not str:
            yield _problem((), "argument names should be strings", key)
        else:
            yield from _value_problems(value, (key,))


def _value_problems(value: Any, loc: tuple[Any, ...]) -> Iterator[dict[str, Any]]:
    # Exact types: numpy's float64 and str_ subclass float and str, and bool subclasses int.
    kind = type(value)
    if kind in (int, float):
        if not is_json_number(value):
            yield _problem(loc, "Input should be a finite number", value)
    elif kind in (list, dict) and len(loc) >= MAX_ARGUMENT_DEPTH:
        # `loc` has one entry per level below the arguments object, which is the first level.
        yield {"type": "json_depth", "loc": loc[:1], "msg": f"nested deeper than {MAX_ARGUMENT_DEPTH} levels"}
    elif kind is list:
        for index, item in enumerate(value):
            yield from _value_problems(item, (*loc, index))
    elif kind is dict:
        for key, item in value.items():
            if type(key) is not str:
                yield _problem(loc, "object keys should be strings", key)
            else:
                yield from _value_problems(item, (*loc, key))
    elif kind not in JSON_SCALARS:
        yield _problem(loc, _NOT_JSON.format(_type_name(kind)), value)


def is_json_number(value: Any) -> bool:
    """A finite int or float, exactly (a bool or a numpy scalar is not): what a JSON number arrives as."""
    if type(value) is float:
        return math.isfinite(value)
    # A double is what every JSON reader makes of a number; past its range it is infinite.
    return type(value) is int and abs(value) <= sys.float_info.max


def _problem(loc: tuple[Any, ...], message: str, value: Any) -> dict[str, Any]:
    return {"type": "json_value", "loc": loc, "msg": message, "input": value}


def _type_name(kind: type) -> str:
    return kind.__qualname__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__qualname__}"
