"""The tool contract: `@tool` functions, their context and results, and the Toolkit that runs them."""

from rpent.tools.call import ToolCall
from rpent.tools.context import ToolCancelled, ToolContext
from rpent.tools.result import FINISH_MARKER, ToolResult, finish_payload
from rpent.tools.tool import Tool, ToolArgumentError, ToolDefinitionError, readonly, tool
from rpent.tools.toolkit import Command, Toolkit

__all__ = [
    "FINISH_MARKER",
    "Command",
    "Tool",
    "ToolArgumentError",
    "ToolCall",
    "ToolCancelled",
    "ToolContext",
    "ToolDefinitionError",
    "ToolResult",
    "Toolkit",
    "finish_payload",
    "readonly",
    "tool",
]
