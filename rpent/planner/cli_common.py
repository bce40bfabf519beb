"""What the agent-CLI planners (claude_code, codex) share: the toolkit served to the CLI over MCP.

The CLI runs as a subprocess; the toolkit stays in the planner's process and is served to it
over streamable HTTP on 127.0.0.1 (an ephemeral port) for the length of one run. Serving it
here, rather than giving the CLI a stdio command, keeps one toolkit and lets the planner see
every call: it refuses calls once the run is over, hands pending operator messages to the model
inside the next tool result, records the transcript, and notices an accepted finish at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server

from rpent.mcp import McpHttpServer
from rpent.mcp.bridge import BridgeOptions, ToolkitBridge, result_to_mcp
from rpent.tools.api import ToolkitAPI
from rpent.tools.result import ToolResult

NUDGE_TEXT = (
    "You ended your turn without calling the finish tool, so the task is still open. "
    "Continue working, or call the finish tool to report the outcome."
)
#: How long stopping a run waits for the active tool call to return (the robot to stop).
CANCEL_TIMEOUT_S = 60.0


class CliError(RuntimeError):
    """The agent CLI could not do its part (e.g. the robot's MCP server is not connected)."""


def operator_note(messages: list[str]) -> str:
    return "\n".join(f"Message from the operator: {text}" for text in messages)


def read_roots(toolkit: ToolkitAPI) -> list[Path]:
    """The run's output directory and memory directory: the only places the CLI may read files."""
    roots = []
    if toolkit.output_dir is not None:
        roots.append(Path(toolkit.output_dir).resolve())
    memory = getattr(toolkit, "memory", None)
    if memory is not None and getattr(memory, "root", None) is not None:
        roots.append(Path(memory.root).resolve())
    return roots


def inside(path: str | os.PathLike[str], roots: list[Path]) -> bool:
    """True if `path` (resolved: `..` and symlinks followed) lies in one of `roots`."""
    try:
        resolved = Path(path).expanduser().resolve()
    except (OSError, RuntimeError, ValueError):
        return False
    return any(resolved == root or root in resolved.parents for root in roots)


def find_executable(explicit: str | os.PathLike[str] | None, env_var: str, repo_relative: str, name: str) -> str | None:
    """An explicit path, else $env_var, else <repo>/repo_relative, else `name` on PATH."""
    if explicit:
        return str(explicit)
    if os.environ.get(env_var):
        return os.environ[env_var]
    repo_copy = Path(__file__).resolve().parents[2] / repo_relative
    if repo_copy.is_file():
        return str(repo_copy)
    return shutil.which(name)


async def terminate_group(process: asyncio.subprocess.Process, grace_s: float = 5.0) -> None:
    """SIGTERM to a CLI started with start_new_session=True and its children, SIGKILL if it lingers."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, sig)
        try:
            await asyncio.wait_for(asyncio.shield(process.wait()), grace_s)
            return
        except asyncio.TimeoutError:
            continue


class RunBridge:
    """The toolkit as an MCP server for one run, with the planner's view of every call.

    `take_messages()` returns the operator messages waiting for the model; they are appended to
    the next tool result. `on_call_done(name)` is called (from the server thread) after each
    call; `admit(name, arguments)` may return a refusal text (run over, limit reached) before
    anything moves. `records` holds one transcript entry per call, with image paths.
    """

    def __init__(
        self,
        toolkit: ToolkitAPI,
        *,
        name: str,
        inline_images: bool,
        take_messages: Callable[[], list[str]],
        on_call_done: Callable[[str], Any] | None = None,
        admit: Callable[[str, dict[str, Any]], str | None] | None = None,
        on_record: Callable[[dict[str, Any]], Any] | None = None,
    ) -> None:
        self.toolkit = toolkit
        self._take_messages = take_messages
        self._on_call_done = on_call_done
        self._admit = admit
        self._on_record = on_record
        self._lock = threading.Lock()
        self._closed_reason: str | None = None
        self.calls: list[str] = []  # tool names in the order they ran
        bridge = _PlannerBridge(toolkit, BridgeOptions(name=name, include_read_image=False, images=inline_images), self)
        self.tool_names = [t.name for t in bridge.mcp_tools()]
        server: Server[Any] = Server(
            name, version="0", get_tool_input_schema=bridge.input_schema,
            on_list_tools=bridge.list_tools, on_call_tool=bridge.call_tool,
        )
        self._http = McpHttpServer(server, port=0)

    @property
    def url(self) -> str:
        assert self._http.url is not None, "RunBridge not started"
        return self._http.url

    def start(self) -> RunBridge:
        self._http.start()
        return self

    def stop(self) -> None:
        self.close("the run is over")
        self._http.stop()

    def close(self, reason: str) -> None:
        """Refuse every later call with `reason` (the calls already running are not touched)."""
        with self._lock:
            if self._closed_reason is None:
                self._closed_reason = reason

    def refusal(self, name: str, arguments: dict[str, Any]) -> str | None:
        with self._lock:
            if self._closed_reason is not None:
                return f"not executed: {self._closed_reason}"
        return self._admit(name, arguments) if self._admit is not None else None

    def __enter__(self) -> RunBridge:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class _PlannerBridge(ToolkitBridge):
    def __init__(self, toolkit: ToolkitAPI, options: BridgeOptions, run: RunBridge) -> None:
        super().__init__(toolkit, options)
        self.run = run

    async def call_tool(self, ctx: ServerRequestContext[Any], params: types.CallToolRequestParams) -> types.CallToolResult:
        name, arguments = params.name, dict(params.arguments or {})
        # admit may block briefly (waiting for the CLI's own announcement of the call).
        refusal = await asyncio.to_thread(self.run.refusal, name, arguments)
        started = time.monotonic()
        if refusal is not None:
            result = ToolResult(error=refusal)
        elif self._offered(name) is None:
            names = ", ".join(t.name for t in self.mcp_tools())
            result = ToolResult(error=f"unknown tool '{name}' (available: {names})")
        else:
            result = await self._run(ctx, name, arguments)
            self.run.calls.append(name)
        notes = self.run._take_messages() if self.toolkit.finish_result is None else []
        answer = result_to_mcp(result, images=self.options.images)
        if notes:
            first = answer.content[0]
            assert isinstance(first, types.TextContent)
            first.text += "\n\n" + operator_note(notes)
        record: dict[str, Any] = {
            "role": "tool", "name": name, "input": arguments, "content": result.to_dict(),
            "elapsed_s": round(time.monotonic() - started, 3),
        }
        if result.is_error:
            record["is_error"] = True
        if result.image_paths:
            record["images"] = [str(Path(p).resolve()) for p in result.image_paths]
        if notes:
            record["operator_messages"] = notes
        if self.run._on_record is not None:
            self.run._on_record(record)
        if refusal is None and self.run._on_call_done is not None:
            self.run._on_call_done(name)
        return answer


class RunControl:
    """The stop signals of one run, set from any thread: finish accepted, operator abort, limits.

    Create it inside the planner's event loop. The first stop wins; `halt()` then refuses further
    calls, cancels the active one and waits until it has returned (the robot has stopped).
    """

    def __init__(self, toolkit: ToolkitAPI, max_wall_time_s: float | None) -> None:
        self.toolkit = toolkit
        self.max_wall_time_s = max_wall_time_s
        self.started = time.monotonic()
        self.loop = asyncio.get_running_loop()
        self.stopped = asyncio.Event()
        self._lock = threading.Lock()
        self.status: Any = None
        self.reason = ""
        self.bridge: RunBridge | None = None

    def request_stop(self, status: Any, reason: str) -> bool:
        """Thread-safe; returns False if the run was already stopping."""
        with self._lock:
            if self.status is not None:
                return False
            self.status, self.reason = status, reason
        if self.bridge is not None:
            self.bridge.close(reason)
        self.loop.call_soon_threadsafe(self.stopped.set)
        return True

    def remaining_s(self) -> float | None:
        if self.max_wall_time_s is None:
            return None
        return max(0.0, self.max_wall_time_s - (time.monotonic() - self.started))

    async def race(self, step: Any) -> tuple[bool, Any]:
        """Await `step` unless the run stops or the wall time runs out first.

        Returns (True, result) if the step finished, else (False, None) with the step cancelled;
        a deadline is reported through `on_deadline`, which the caller sets.
        """
        task = asyncio.ensure_future(step)
        stop = asyncio.ensure_future(self.stopped.wait())
        try:
            done, _ = await asyncio.wait({task, stop}, timeout=self.remaining_s(), return_when=asyncio.FIRST_COMPLETED)
        finally:
            stop.cancel()
        if task in done:
            return True, task.result()
        task.cancel()
        try:
            await task
        except (asyncio.CancelledError, Exception):  # the step is abandoned; its outcome is moot
            pass
        return False, None

    async def halt(self) -> None:
        """Refuse later calls, cancel the active call and wait until it has returned."""
        if self.bridge is not None:
            self.bridge.close(self.reason or "the run is over")
        await asyncio.to_thread(self.toolkit.cancel_active_and_wait, CANCEL_TIMEOUT_S, self.reason or "run stopped")
        self.toolkit.resume_calls()  # leave the toolkit as we found it (admitting calls)
