"""What one RobotAgent.chat() leaves behind (ChatResult, ToolCallRecord), and the Anthropic message
blocks the agent writes into its history."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

#: Tool names the model API accepts.
TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,128}$")


@dataclass
class ToolCallRecord:
    """One tool call made during chat()."""

    name: str
    server: str  # the MCP server's name, or "local" for extra_tools
    arguments: dict[str, Any]
    content: list[dict[str, Any]]
    is_error: bool
    duration_s: float

    @property
    def text(self) -> str:
        return "\n".join(b["text"] for b in self.content if b.get("type") == "text")

    @property
    def images(self) -> int:
        return sum(1 for b in self.content if b.get("type") == "image")


@dataclass
class ChatResult:
    """How one chat() ended: the model's final text, why it stopped, and the calls it made.

    `discarded`: replies whose stream broke off, as far as they had arrived (never acted on).
    """

    text: str
    stop_reason: str  # end_turn, stop_sequence, max_tokens, refusal, ... or "max_iterations", "output_cut_off"
    iterations: int
    tool_calls: list[ToolCallRecord] = field(default_factory=list)
    input_tokens: int = 0
    output_tokens: int = 0
    discarded: list[dict[str, Any]] = field(default_factory=list)


def result_block(tool_use_id: str, content: list[dict[str, Any]], is_error: bool) -> dict[str, Any]:
    block: dict[str, Any] = {"type": "tool_result", "tool_use_id": tool_use_id, "content": content}
    if is_error:
        block["is_error"] = True
    return block


def block_dict(block: Any) -> dict[str, Any]:
    if block.type == "text":
        return {"type": "text", "text": block.text}
    if block.type == "tool_use":
        return {"type": "tool_use", "id": block.id, "name": block.name, "input": block.input}
    data = block.model_dump(mode="json", exclude_none=True)  # thinking blocks go back verbatim
    data.pop("parsed_output", None)
    return data


def check_local_tool(spec: Any, index: int) -> dict[str, Any]:
    where = f"extra_tools[{index}]"
    if not isinstance(spec, dict):
        raise ValueError(f"{where}: must be an Anthropic tool dict with name, description, input_schema")
    name = spec.get("name")
    if not isinstance(name, str) or not TOOL_NAME.match(name):
        raise ValueError(f"{where}.name: must match [a-zA-Z0-9_-]{{1,128}}, got {name!r}")
    if not isinstance(spec.get("input_schema"), dict):
        raise ValueError(f"{where}.input_schema: must be a JSON schema object")
    return dict(spec)
