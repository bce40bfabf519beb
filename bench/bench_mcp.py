"""What the MCP bridge adds per tool call.

A read-only no-op tool is called N times (sequentially) through: the toolkit directly
(`execute_tool` from asyncio, the floor), the SDK's in-process client, streamable HTTP on
127.0.0.1 (both protocol eras), and stdio to a subprocess. Also: the time from a cancelled
request to the toolkit call having returned (robot stopped), over HTTP.

A bare SDK server over HTTP (no toolkit) is measured beside them: most of the HTTP cost is the
SDK's transport, not the bridge.

Run: . .venv/bin/activate && python bench/bench_mcp.py [--calls 200]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import mcp

from rpent.mcp import McpHttpServer, build_mcp_server
from rpent.planner.base import execute_tool
from rpent.tools import ToolContext, Toolkit, readonly, tool


@tool
@readonly
def noop(*, ctx: ToolContext) -> dict:
    """Do nothing."""
    return {}


@tool
def hold(*, ctx: ToolContext) -> dict:
    """Hold still until cancelled."""
    ctx.state["started"].set()
    ctx.wait_cancelled(30.0)
    ctx.check_cancelled()
    return {}


class BenchToolkit(Toolkit):
    tools = (noop, hold)


async def _timed(calls: int, call: Callable[[], Awaitable[Any]]) -> list[float]:
    for _ in range(min(20, calls)):  # warm-up
        await call()
    samples = []
    for _ in range(calls):
        t0 = time.perf_counter()
        await call()
        samples.append(time.perf_counter() - t0)
    return samples


async def _via_client(target: Any, calls: int, **client_options: Any) -> list[float]:
    async with mcp.Client(target, **client_options) as client:
        return await _timed(calls, lambda: client.call_tool("noop", {}))


async def _cancel_latency(url: str, toolkit: BenchToolkit, rounds: int) -> list[float]:
    samples = []
    async with mcp.Client(url) as client:
        for _ in range(rounds):
            started = threading.Event()
            toolkit.state["started"] = started
            call = asyncio.ensure_future(client.call_tool("hold", {}))
            await asyncio.to_thread(started.wait, 10)
            t0 = time.perf_counter()
            call.cancel()
            try:
                await call
            except asyncio.CancelledError:
                pass
            # A read-only call is admitted only once the cancelled exclusive call has returned.
            await asyncio.to_thread(toolkit.execute_tool, "noop")
            samples.append(time.perf_counter() - t0)
    return samples


def _bare_sdk_server() -> Any:
    """The SDK's own HTTP cost: a server whose tool answers at once, without any toolkit."""
    import mcp_types as types
    from mcp.server.lowlevel import Server

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[types.Tool(name="noop", input_schema={"type": "object"})])

    async def call_tool(ctx: Any, params: Any) -> types.CallToolResult:
        return types.CallToolResult(content=[types.TextContent(type="text", text="{}")])

    return Server("bare", on_list_tools=list_tools, on_call_tool=call_tool)


def _row(label: str, samples: list[float], floor: float) -> str:
    median = statistics.median(samples)
    p90 = sorted(samples)[int(0.9 * (len(samples) - 1))]
    return f"{label:<34} median {median * 1e3:8.3f} ms   p90 {p90 * 1e3:8.3f} ms   x{median / floor:7.1f} floor"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=200)
    args = parser.parse_args()
    toolkit = BenchToolkit()
    server = build_mcp_server(toolkit)

    floor = asyncio.run(_timed(args.calls, lambda: execute_tool(toolkit, "noop", {})))
    floor_median = statistics.median(floor)
    rows = [_row("toolkit via execute_tool (floor)", floor, floor_median)]
    rows.append(_row("MCP in-process client", asyncio.run(_via_client(server, args.calls)), floor_median))
    with McpHttpServer(_bare_sdk_server(), port=0) as bare:
        assert bare.url is not None
        rows.append(_row("bare SDK server, HTTP (2026-07-28)", asyncio.run(_via_client(bare.url, args.calls)), floor_median))
    with McpHttpServer(server, port=0) as http:
        assert http.url is not None
        rows.append(_row("MCP streamable HTTP (2026-07-28)", asyncio.run(_via_client(http.url, args.calls)), floor_median))
        rows.append(_row("MCP streamable HTTP (handshake era)",
                         asyncio.run(_via_client(http.url, args.calls, mode="legacy")), floor_median))
        rows.append(_row("HTTP cancel -> call returned", asyncio.run(_cancel_latency(http.url, toolkit, 20)), floor_median))
    stdio = mcp.StdioServerParameters(command=sys.executable, args=["-c", _STDIO_SERVER])
    rows.append(_row("MCP stdio (subprocess)", asyncio.run(_via_client(stdio, args.calls)), floor_median))
    toolkit.close()
    print(f"MCP bridge, {args.calls} sequential no-op calls per row")
    print("\n".join(rows))


_STDIO_SERVER = f"""
import asyncio, sys
sys.path.insert(0, {str(Path(__file__).resolve().parent)!r})
from bench_mcp import BenchToolkit
from rpent.mcp import build_mcp_server, serve_stdio
asyncio.run(serve_stdio(build_mcp_server(BenchToolkit())))
"""


if __name__ == "__main__":
    main()
