"""A toolkit (rpent.tools.api.ToolkitAPI: in process or over ROS) published as an MCP server: its tools,
schemas, results and cancellation.

Every call goes through the toolkit's own scheduler (`rpent.tools.async_call.execute_tool`), so
MCP clients get the same ordering, validation and stop-on-cancel guarantees as in-process
planners. An MCP cancellation of one request cancels exactly that tool call, and the request
only settles once the call has returned (the robot has stopped).
"""

from __future__ import annotations

import asyncio
import base64
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server

from rpent.tools import ToolResult
from rpent.tools.api import ToolkitAPI
from rpent.tools.async_call import execute_tool

log = logging.getLogger(__name__)

#: How long a cancelled call may take to stop before the request gives up waiting for it.
CANCEL_CLEANUP_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class BridgeOptions:
    """What the server offers.

    `include_read_image`: list the common `read_image` tool. Off by default: Claude Code and
    Codex open the saved PNG paths with their own file readers, and image blocks come inline.
    `images`: send each result image as an MCP image block (base64 PNG) beside the text.
    """

    name: str = "rpent"
    include_read_image: bool = False
    images: bool = True
    instructions: str | None = None


def result_to_mcp(result: ToolResult, *, images: bool = True) -> types.CallToolResult:
    """A ToolResult as MCP content: its JSON text (naming saved image files), then PNG blocks."""
    text = result.to_text()
    if result.image_paths:
        # Absolute paths: the client reading them may run in another directory.
        paths = ", ".join(str(Path(p).resolve()) for p in result.image_paths)
        text += f"\n\nImages saved as PNG files (open them to view): {paths}"
    content: list[types.TextContent | types.ImageContent] = [types.TextContent(type="text", text=text)]
    if images:
        content.extend(
            types.ImageContent(type="image", data=base64.b64encode(png).decode("ascii"), mime_type="image/png")
            for png in result.images
        )
    return types.CallToolResult(content=content, is_error=result.is_error)


class ToolkitBridge:
    """Holds the toolkit and answers tools/list and tools/call for an MCP `Server`."""

    def __init__(self, toolkit: ToolkitAPI, options: BridgeOptions) -> None:
        self.toolkit = toolkit
        self.options = options

    def mcp_tools(self) -> list[types.Tool]:
        return [
            types.Tool(
                name=t.name,
                description=t.description,
                input_schema=t.input_schema,
                annotations=types.ToolAnnotations(read_only_hint=t.readonly),
            )
            for t in self.toolkit.list_tools(include_read_image=self.options.include_read_image)
        ]

    def input_schema(self, name: str) -> Mapping[str, Any] | None:
        tool = self._offered(name)
        return tool.input_schema if tool is not None else None

    def _offered(self, name: str) -> Any:
        if name == "read_image" and not self.options.include_read_image:
            return None
        return self.toolkit.get_tool(name)

    async def list_tools(
        self, ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=self.mcp_tools())

    async def call_tool(self, ctx: ServerRequestContext[Any], params: types.CallToolRequestParams) -> types.CallToolResult:
        if self._offered(params.name) is None:
            names = ", ".join(t.name for t in self.mcp_tools())
            log.warning("MCP call refused: unknown tool %r", params.name)
            return result_to_mcp(ToolResult(error=f"unknown tool '{params.name}' (available: {names})"))
        result = await self._run(ctx, params.name, dict(params.arguments or {}))
        return result_to_mcp(result, images=self.options.images)

    async def _run(self, ctx: ServerRequestContext[Any], name: str, arguments: dict[str, Any]) -> ToolResult:
        loop = asyncio.get_running_loop()
        stages: asyncio.Queue[str] = asyncio.Queue()

        def on_stage(stage: str, message: str, progress: float | None) -> None:
            # Called from the toolkit's worker thread.
            text = stage if not message else f"{stage}: {message}"
            if progress is not None:
                text += f" ({progress:.0%})"
            loop.call_soon_threadsafe(stages.put_nowait, text)

        # The call runs in its own task, outside the SDK's cancel scope: a peer cancellation then
        # reaches execute_tool exactly once (it cancels the toolkit call), and the wait for the
        # robot to stop is shielded so the scope's repeated cancellation cannot cut it short.
        call = asyncio.ensure_future(
            execute_tool(self.toolkit, name, arguments, on_stage=on_stage, cleanup_timeout_s=CANCEL_CLEANUP_TIMEOUT_S)
        )
        reporter = asyncio.ensure_future(_report_progress(ctx, stages))
        try:
            return await asyncio.shield(call)
        except asyncio.CancelledError:
            if not call.done():
                log.info("MCP request for %s cancelled: cancelling the tool call", name)
                call.cancel()
                with anyio.CancelScope(shield=True):
                    await asyncio.wait({call})
            raise
        except Exception as exc:  # submit itself failed: the client still gets a tool error
            log.exception("tool %s failed inside the bridge", name)
            return ToolResult(error=f"{type(exc).__name__}: {exc}")
        finally:
            reporter.cancel()


async def _report_progress(ctx: ServerRequestContext[Any], stages: asyncio.Queue[str]) -> None:
    """Forward toolkit stages as MCP progress (a no-op unless the client sent a progress token)."""
    count = 0
    while True:
        message = await stages.get()
        count += 1
        try:
            await ctx.session.report_progress(count, None, message)
        except Exception as exc:  # progress is best effort; the call goes on
            log.debug("progress notification failed: %s", exc)


def build_mcp_server(
    toolkit: ToolkitAPI,
    *,
    name: str = "rpent",
    include_read_image: bool = False,
    images: bool = True,
    instructions: str | None = None,
) -> Server[Any]:
    """An MCP server (low-level `mcp.server.lowlevel.Server`) exposing `toolkit`'s tools.

    Serve it with `rpent.mcp.serve_stdio`, `rpent.mcp.serve_http` or `McpHttpServer`, or
    connect to it in-process with `mcp.Client(server)`. The caller owns the toolkit (and
    closes it); the server never does.
    """
    bridge = ToolkitBridge(
        toolkit, BridgeOptions(name=name, include_read_image=include_read_image, images=images, instructions=instructions)
    )
    server: Server[Any] = Server(
        name,
        version=_version(),
        instructions=instructions,
        get_tool_input_schema=bridge.input_schema,
        on_list_tools=bridge.list_tools,
        on_call_tool=bridge.call_tool,
    )
    return server


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("rpent")
    except Exception:
        return "0"
