"""One MCP client connection per configured server, each owned by its own task.

The SDK's transports hold task groups that must be left by the task that entered them, so each
connection lives in a dedicated task: connect, disconnect and calls may then come from any task,
and servers start side by side.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import logging
from dataclasses import dataclass, field
from typing import Any

import mcp
import mcp_types as types

from rpent.mcp.config import McpServerConfig

log = logging.getLogger(__name__)


@dataclass
class ServerStatus:
    """What connect() found for one configured server."""

    name: str
    transport: str
    connected: bool = False
    tools: list[str] = field(default_factory=list)
    error: str | None = None


class ServerConnection:
    def __init__(self, config: McpServerConfig, *, connect_timeout_s: float) -> None:
        self.config = config
        self.connect_timeout_s = connect_timeout_s
        self.client: mcp.Client | None = None
        self.tools: list[types.Tool] = []
        self._task: asyncio.Task[None] | None = None
        self._stop = asyncio.Event()
        self._ready: asyncio.Future[None] | None = None

    @property
    def name(self) -> str:
        return self.config.name

    async def start(self) -> None:
        """Connect and list the tools; raise (with a readable message) if that fails or times out."""
        self._ready = asyncio.get_running_loop().create_future()
        self._task = asyncio.create_task(self._hold(), name=f"mcp-server-{self.name}")
        try:
            await asyncio.wait_for(asyncio.shield(self._ready), self.connect_timeout_s)
        except asyncio.TimeoutError:
            await self._abandon()
            raise TimeoutError(f"did not answer within {self.connect_timeout_s:g} s") from None
        except BaseException:
            await self._abandon()
            raise

    async def _abandon(self, timeout_s: float = 15.0) -> None:
        """Stop a connection that never became ready (cancelling its transport ends the subprocess)."""
        task, self._task = self._task, None
        if task is not None and not task.done():
            task.cancel()
            await asyncio.wait({task}, timeout=timeout_s)

    async def _hold(self) -> None:
        assert self._ready is not None
        try:
            async with contextlib.AsyncExitStack() as stack:
                target = await self._target(stack)
                info = types.Implementation(name="rpent-robot-agent", version="1")
                client = await stack.enter_async_context(mcp.Client(target, client_info=info))
                self.client = client
                self.tools = await _all_tools(client)
                self._ready.set_result(None)
                await self._stop.wait()
        except BaseException as exc:  # reported through _ready or the log
            if not self._ready.done():
                self._ready.set_exception(_plain(exc))
            elif not isinstance(exc, asyncio.CancelledError):
                log.warning("MCP server %s: connection ended: %s", self.name, describe_error(exc))
        finally:
            self.client = None

    async def _target(self, stack: contextlib.AsyncExitStack) -> Any:
        if self.config.transport == "http":
            if not self.config.headers:
                return self.config.url
            from mcp.client.streamable_http import streamable_http_client
            from mcp.shared._httpx_utils import create_mcp_http_client

            http = await stack.enter_async_context(create_mcp_http_client(headers=dict(self.config.headers)))
            return streamable_http_client(self.config.url, http_client=http)
        return mcp.StdioServerParameters(
            command=self.config.command, args=list(self.config.args), env=dict(self.config.env) or None,
            cwd=self.config.cwd,
        )

    async def call(self, name: str, arguments: dict[str, Any], timeout_s: float | None) -> types.CallToolResult:
        client = self.client
        if client is None:
            raise ConnectionError(f"MCP server {self.name!r} is not connected")
        return await client.call_tool(name, arguments, read_timeout_seconds=timeout_s)

    async def close(self, timeout_s: float = 15.0) -> None:
        """Leave the session; for stdio this closes the server's stdin and waits for it to exit."""
        self._stop.set()
        task, self._task = self._task, None
        if task is None:
            return
        done, _ = await asyncio.wait({task}, timeout=timeout_s)
        if not done:
            log.warning("MCP server %s did not close within %.0f s; cancelling", self.name, timeout_s)
            task.cancel()
            await asyncio.wait({task}, timeout=timeout_s)


async def _all_tools(client: mcp.Client) -> list[types.Tool]:
    tools: list[types.Tool] = []
    cursor = None
    for _ in range(100):  # a server that paginates forever must not hang connect()
        page = await client.list_tools(cursor=cursor)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if not cursor:
            break
    return tools


def _plain(exc: BaseException) -> BaseException:
    """The one interesting exception inside nested exception groups (task-group failures)."""
    inner = getattr(exc, "exceptions", None)  # BaseExceptionGroup (3.11+), duck-typed
    while isinstance(inner, tuple) and len(inner) == 1:
        exc = inner[0]
        inner = getattr(exc, "exceptions", None)
    return exc


def describe_error(exc: BaseException) -> str:
    exc = _plain(exc)
    text = str(exc) or type(exc).__name__
    return text if type(exc).__name__ in text else f"{type(exc).__name__}: {text}"


def mcp_content_to_anthropic(content: list[Any]) -> list[dict[str, Any]]:
    """MCP result content as Anthropic tool_result content: text and images pass through."""
    blocks: list[dict[str, Any]] = []
    for item in content:
        kind = getattr(item, "type", None)
        if kind == "text":
            blocks.append({"type": "text", "text": item.text})
        elif kind == "image" and item.mime_type in ("image/png", "image/jpeg", "image/gif", "image/webp"):
            blocks.append({"type": "image", "source": {"type": "base64", "media_type": item.mime_type, "data": item.data}})
        elif kind == "resource" and hasattr(item.resource, "text"):
            blocks.append({"type": "text", "text": item.resource.text})
        else:
            described = item.model_dump(mode="json", exclude={"data", "blob"}) if hasattr(item, "model_dump") else repr(item)
            blocks.append({"type": "text", "text": f"[{kind or 'unknown'} content not shown: {json.dumps(described)[:500]}]"})
    return blocks or [{"type": "text", "text": "(no content)"}]


def local_result_to_anthropic(value: Any) -> list[dict[str, Any]]:
    """What an extra_dispatch coroutine returned, as tool_result content."""
    if isinstance(value, str):
        return [{"type": "text", "text": value}]
    if isinstance(value, bytes):  # a PNG
        return [{"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                             "data": base64.b64encode(value).decode("ascii")}}]
    if isinstance(value, list) and all(isinstance(b, dict) and "type" in b for b in value):
        return value or [{"type": "text", "text": "(no content)"}]
    return [{"type": "text", "text": json.dumps(value, default=str)}]

