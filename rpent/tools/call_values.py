"""What goes into a tool call and what comes out: arguments as a JSON object, a handler's return as a
ToolResult, a successful call as a recipe line. Shared by every executor, in process or over ROS."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from rpent.record.values import describe_exception
from rpent.tools.arguments import MAX_ARGUMENT_DEPTH
from rpent.tools.result import ToolResult
from rpent.tools.tool import ToolArgumentError


def arguments_mapping(arguments: Mapping[str, Any] | str | bytes | None, name: str) -> dict[str, Any]:
    """The call's arguments as a plain dict (JSON text is parsed); ToolArgumentError naming tool `name` if not an object."""
    refusal = f"invalid arguments for tool '{name}': "
    if arguments is None:
        return {}
    if isinstance(arguments, (str, bytes)):
        try:
            arguments = json.loads(arguments or "{}")
        except RecursionError:
            # The parser gives up near Python's recursion limit; shallower texts are measured by validate.
            raise ToolArgumentError(refusal + f"JSON nested deeper than {MAX_ARGUMENT_DEPTH} levels") from None
        except ValueError as exc:  # JSONDecodeError, bytes that are not UTF-8, a 5,000-digit number
            raise ToolArgumentError(refusal + f"not valid JSON ({exc})") from None
    if not isinstance(arguments, Mapping):
        raise ToolArgumentError(refusal + f"must be a JSON object, got {type(arguments).__name__}")
    try:
        return dict(arguments)  # a plain copy: validation reads it more than once
    except Exception as exc:
        raise ToolArgumentError(
            refusal + f"the {type(arguments).__name__} could not be read ({describe_exception(exc)})"
        ) from None


def as_result(value: Any) -> ToolResult:
    """A handler's return value as a ToolResult; TypeError for a ToolResult the executor cannot use."""
    if type(value) is dict:
        return ToolResult(data=value)
    if isinstance(value, ToolResult):
        # The executor reads data as a mapping and saves images as files: say so here, not later.
        if not isinstance(value.data, Mapping):
            raise TypeError(f"the tool returned a ToolResult whose data is a {type(value.data).__name__}, not a dict")
        for index, image in enumerate(value.images):
            if not isinstance(image, (bytes, bytearray)):
                raise TypeError(
                    f"the tool returned a ToolResult whose images[{index}] is a {type(image).__name__}, not PNG bytes"
                )
        return value
    if value is None:
        return ToolResult()
    if isinstance(value, Mapping):
        return ToolResult(data=dict(value))
    return ToolResult(data={"result": value})


def recipe_line(entry: dict[str, Any]) -> str:
    line = json.dumps(entry, ensure_ascii=False)
    try:
        line.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate in an argument: escaped, so replay gets the same string
        line = json.dumps(entry, ensure_ascii=True)
    return line


def outcome_of(data: Any, fields: Sequence[str]) -> dict[str, bool]:
    """Each outcome field found anywhere in a tool's own result (nested dicts and lists, e.g. one entry
    per arm), true only if every occurrence is true; fields the result does not carry are left out."""
    found: dict[str, bool] = {}
    stack = [data]
    while stack:
        node = stack.pop()
        if isinstance(node, Mapping):
            for key, value in node.items():
                if key in fields and isinstance(value, bool):
                    found[key] = found.get(key, True) and value
                elif isinstance(value, (Mapping, list, tuple)):
                    stack.append(value)
        elif isinstance(node, (list, tuple)):
            stack.extend(node)
    return {name: found[name] for name in fields if name in found}


def recipe_entry(tool: str, arguments: dict[str, Any], outcome: Mapping[str, bool]) -> dict[str, Any]:
    """A recipe line: the call, and `expect` naming the outcome fields the recorded call reported false
    (a replay stops at a step reporting false what the recipe expects true: rpent.planner.replay)."""
    entry: dict[str, Any] = {"tool": tool, "arguments": arguments}
    unmet = {name: False for name, value in outcome.items() if not value}
    if unmet:
        entry["expect"] = unmet
    return entry
