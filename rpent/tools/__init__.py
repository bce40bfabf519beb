"""The tool contract: `@tool` functions, their context and results, the Toolkit that runs them, and the
ToolkitAPI every toolkit (in process or over ROS) offers its callers."""

from rpent.tools.api import CallHandle, ToolInfo, ToolkitAPI
from rpent.tools.call import ToolCall
from rpent.tools.context import ToolCancelled, ToolContext
from rpent.tools.result import FINISH_MARKER, ToolResult, finish_payload
from rpent.tools.tool import Tool, ToolArgumentError, ToolDefinitionError, readonly, tool
from rpent.tools.toolkit import Command, Toolkit

__all__ = [
    "FINISH_MARKER",
    "CallHandle",
    "Command",
    "Tool",
    "ToolArgumentError",
    "ToolCall",
    "ToolCancelled",
    "ToolContext",
    "ToolDefinitionError",
    "ToolInfo",
    "ToolResult",
    "Toolkit",
    "ToolkitAPI",
    "finish_payload",
    "readonly",
    "tool",
]
