"""Shared pieces of the MCP tests: the toy robot's winning tool sequence, servers, records."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import threading
from pathlib import Path
from typing import Any

import anyio
from mcp import StdioServerParameters

# Solves the toy task (red block into the bin) and reports it.
TOY_SOLUTION: list[tuple[str, dict[str, Any]]] = [
    ("get_state", {}),
    ("move_to", {"x_m": 0.1, "y_m": 0.45, "z_m": 0.1}),
    ("move_to", {"x_m": 0.1, "y_m": 0.45, "z_m": 0.04}),
    ("grasp", {}),
    ("move_to", {"x_m": 0.1, "y_m": 0.45, "z_m": 0.15}),
    ("move_to", {"x_m": 0.5, "y_m": 0.1, "z_m": 0.15}),
    ("release", {}),
    ("capture_image", {}),
    ("finish", {"status": "success", "summary": "red block is in the bin"}),
]
TOY_SOLUTION_NAMES = [name for name, _ in TOY_SOLUTION]
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
FAR_TARGET = {"x_m": 0.55, "y_m": 0.55, "z_m": 0.3}  # ~0.36 m from the start: 18 s at 0.02 m/s


async def far_move_running(client: Any, timeout_s: float = 20.0) -> asyncio.Future[Any]:
    """Start move_to FAR_TARGET and return once the server reports the call running: the call's future."""
    running = anyio.Event()

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        if message == "running":
            running.set()

    moving = asyncio.ensure_future(client.call_tool("move_to", FAR_TARGET, progress_callback=on_progress))
    with anyio.fail_after(timeout_s):
        await running.wait()
    return moving


def serve_args(output_dir: Path, *extra: str) -> list[str]:
    return ["-m", "rpent", "serve-mcp", "--robot", "toy", "--output-dir", str(output_dir), *extra]


def server_env() -> dict[str, str]:
    # The stdio client passes only a minimal environment; keep the test's memory isolation.
    return {"RPENT_MEMORY_DIR": os.environ["RPENT_MEMORY_DIR"], "PYTHONUNBUFFERED": "1"}


def toy_stdio_params(output_dir: Path, *extra: str) -> StdioServerParameters:
    return StdioServerParameters(command=sys.executable, args=serve_args(output_dir, *extra), env=server_env())


def toy_mcp_entry(output_dir: Path, *extra: str) -> dict[str, Any]:
    return {"command": sys.executable, "args": serve_args(output_dir, *extra), "env": server_env()}


def write_mcp_json(folder: Path, servers: dict[str, Any]) -> Path:
    path = folder / ".mcp.json"
    path.write_text(json.dumps({"mcpServers": servers}), encoding="utf-8")
    return path


def read_steps(output_dir: Path) -> list[dict[str, Any]]:
    path = output_dir / "steps.jsonl"
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


class EventLog:
    """A dashboard sink that lets a test wait for toolkit events (tool_started, tool_finished)."""

    enabled = True
    clips = False

    def __init__(self) -> None:
        self.events: list[tuple[str, dict[str, Any]]] = []
        self._cond = threading.Condition()

    def publish(self, kind: str, payload: dict[str, Any]) -> None:
        with self._cond:
            self.events.append((kind, payload))
            self._cond.notify_all()

    def wait_for(self, kind: str, tool: str, timeout_s: float = 20.0, count: int = 1) -> dict[str, Any]:
        def matching() -> list[dict[str, Any]]:
            return [p for k, p in self.events if k == kind and p.get("tool") == tool]

        with self._cond:
            if not self._cond.wait_for(lambda: len(matching()) >= count, timeout_s):
                raise TimeoutError(f"no {kind} event #{count} for {tool} within {timeout_s} s: {self.events}")
            return matching()[count - 1]


def wait_until(predicate: Any, timeout_s: float = 20.0, interval_s: float = 0.02) -> None:
    """Wait for a condition that announces itself only through files or other processes."""
    import time

    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(f"condition not met within {timeout_s} s")
        time.sleep(interval_s)
