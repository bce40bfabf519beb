"""Awaiting a tool call from asyncio code (planners, the MCP bridge) without blocking the event loop.

Core, not planner code: both the planners and the MCP bridge await tools, and the bridge must not
import a planner. `rpent.planner.base.execute_tool` re-exports it under the name the interface gives.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rpent.tools.api import StageCallback, ToolkitAPI
    from rpent.tools.result import ToolResult

log = logging.getLogger(__name__)


async def execute_tool(
    toolkit: ToolkitAPI,
    name: str,
    arguments: dict[str, Any] | str | None,
    *,
    on_stage: StageCallback | None = None,
    cleanup_timeout_s: float = 60.0,
) -> ToolResult:
    """Run one tool call without blocking the event loop.

    The toolkit runs the call in its own worker thread; this coroutine waits for the call's
    "done" stage without holding a thread. If the awaiting task is cancelled, the call is
    cancelled too and this still waits (up to `cleanup_timeout_s`) until the call has returned,
    i.e. the robot has stopped, before the cancellation propagates. Further cancellations during
    that wait do not cut it short. `on_stage` is called from the worker thread, as with submit.
    """
    loop = asyncio.get_running_loop()
    done = loop.create_future()

    def stage_changed(stage: str, message: str, progress: float | None) -> None:
        if on_stage is not None:
            on_stage(stage, message, progress)
        if stage == "done":
            loop.call_soon_threadsafe(_resolve, done)

    call = toolkit.submit(name, arguments, on_stage=stage_changed)
    try:
        await asyncio.shield(done)
    except asyncio.CancelledError:
        call.cancel("the planner task awaiting this call was cancelled")
        deadline = loop.time() + cleanup_timeout_s
        while not done.done() and loop.time() < deadline:
            try:
                await asyncio.wait({done}, timeout=deadline - loop.time())
            except asyncio.CancelledError:
                continue  # keep waiting for the robot to stop; the caller is cancelled anyway
        if not done.done():
            log.error("tool call %s (%s) had not returned %.0f s after cancel", call.id, name, cleanup_timeout_s)
        raise
    # "done" is reported just before the result is published: this wait is momentary.
    return call.result(timeout=cleanup_timeout_s)


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)
