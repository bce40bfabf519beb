"""MCP for RPent: a toolkit (rpent.tools.api.ToolkitAPI) served as an MCP server (stdio, streamable HTTP),
and RobotAgent, a model conversation that uses the tools of the MCP servers listed in `.mcp.json`.

Names are imported lazily: serving a toolkit does not import the Anthropic SDK.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "BridgeOptions": "rpent.mcp.bridge",
    "build_mcp_server": "rpent.mcp.bridge",
    "result_to_mcp": "rpent.mcp.bridge",
    "McpHttpServer": "rpent.mcp.transports",
    "serve_http": "rpent.mcp.transports",
    "serve_stdio": "rpent.mcp.transports",
    "McpConfigError": "rpent.mcp.config",
    "McpConfigMissing": "rpent.mcp.config",
    "McpServerConfig": "rpent.mcp.config",
    "find_mcp_config": "rpent.mcp.config",
    "load_mcp_config": "rpent.mcp.config",
    "ServerStatus": "rpent.mcp.connections",
    "ChatResult": "rpent.mcp.chat_records",
    "RobotAgent": "rpent.mcp.agent",
    "ToolCallRecord": "rpent.mcp.chat_records",
    "ToolNameConflict": "rpent.mcp.agent",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'rpent.mcp' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
