"""Toolkit <-> ROS message mapping, kept free of rclpy so it is tested without ROS.

The nodes fill generated message classes from these plain values; the ROS toolkit client turns
them back into ToolResults.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from rpent.record.values import json_default
from rpent.tools import Tool, ToolResult

#: Feedback stages a CallTool goal reports, in order.
STAGES = ("queued", "running", "capturing", "done")


class GoalError(ValueError):
    """A CallTool goal cannot be run (names the field and the rule)."""


@dataclass(frozen=True)
class ToolGoal:
    tool: str
    arguments: dict[str, Any]


def parse_goal(goal_tool: str, arguments_json: str, *, served_tool: str | None = None) -> ToolGoal:
    """Read a CallTool goal. On a per-tool server (`served_tool`), `goal.tool` may be empty but must
    not name another tool."""
    tool = goal_tool.strip()
    if served_tool is not None:
        if tool and tool != served_tool:
            raise GoalError(f"tool: this action serves '{served_tool}', the goal names '{tool}'")
        tool = served_tool
    if not tool:
        raise GoalError("tool: required on <ns>/call_tool (the name of the tool to run)")
    text = arguments_json.strip() or "{}"
    try:
        arguments = json.loads(text)
    except json.JSONDecodeError as exc:
        raise GoalError(f"arguments_json: not valid JSON ({exc.msg} at position {exc.pos})") from None
    if not isinstance(arguments, dict):
        raise GoalError(f"arguments_json: must be a JSON object, got {type(arguments).__name__}")
    return ToolGoal(tool, arguments)


def result_fields(result: ToolResult) -> dict[str, Any]:
    """CallTool result fields: is_error, error, result_json, images as (format, bytes)."""
    return {
        "is_error": result.is_error,
        "error": result.error or "",
        "result_json": result.to_text(),
        "images": [("png", png) for png in result.images],
    }


def result_from_fields(is_error: bool, error: str, result_json: str, images: list[tuple[str, bytes]]) -> ToolResult:
    """The inverse of `result_fields`, for clients of a remote toolkit node."""
    try:
        payload = json.loads(result_json) if result_json else {}
    except json.JSONDecodeError:
        payload = {"text": result_json}  # truncated text is no longer JSON
    if not isinstance(payload, dict):
        payload = {"result": payload}
    payload.pop("error", None)
    return ToolResult(data=payload, images=[data for _, data in images], error=(error or "tool failed") if is_error else None)


def tools_json(tools: list[Tool]) -> str:
    """ListTools response: name, description, input_schema, readonly per tool."""
    return json.dumps([t.to_dict() for t in tools])


def feedback_fields(stage: str, message: str = "", progress: float | None = None) -> dict[str, Any]:
    return {"stage": stage, "message": message, "progress": float(progress) if progress is not None else -1.0}


def event_fields(kind: str, payload: dict[str, Any]) -> dict[str, Any]:
    """ToolEvent message fields for a toolkit event."""
    return {
        "kind": kind,
        "call_id": int(payload.get("call_id") or 0),
        "tool": str(payload.get("tool") or ""),
        "payload_json": json.dumps(payload, default=json_default),
    }
