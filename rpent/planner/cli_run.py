"""One run of an agent-CLI planner (claude_code, codex): its state, its stop rules and its result.

Both planners serve the toolkit to their CLI through a RunBridge, take operator messages through an
OperatorInbox, stop through a RunControl and report the same PlannerResult; what differs is how the
CLI is started and how its output is read, which each planner's own run class adds on top.
"""

from __future__ import annotations

import asyncio
import logging
import queue
import tempfile
from collections.abc import Awaitable, Callable, Coroutine
from pathlib import Path
from typing import Any

from rpent.planner.base import OperatorInbox, OperatorInput, PlannerResult, PlannerStatus, TokenUsage
from rpent.planner.cli_common import NUDGE_TEXT, RunBridge, RunControl, operator_note, read_roots
from rpent.tools.api import ToolkitAPI

log = logging.getLogger(__name__)


class CliRun:
    """One solve() call. Subclasses provide `turns` and `usage` and may override `admit` and `wind_down`.

    `planner` must have `max_wall_time_s`, `end_turn_nudges`, `server_name` and `inline_images`.
    """

    label = "agent CLI"  # for log lines and error reasons
    turns: int
    usage: TokenUsage

    def __init__(self, planner: Any, toolkit: ToolkitAPI, system_prompt: str, max_turns: int) -> None:
        self.p = planner
        self.toolkit = toolkit
        self.system_prompt = system_prompt
        self.max_turns = max_turns
        self.control = RunControl(toolkit, planner.max_wall_time_s)
        self.inbox: OperatorInbox | None = None
        self.transcript: list[dict[str, Any]] = [{"role": "system", "content": system_prompt}]
        self.roots = read_roots(toolkit)
        self.error: str | None = None
        self._nudges_left = planner.end_turn_nudges

    async def serve(self, input_queue: queue.Queue[OperatorInput] | None, scratch_prefix: str,
                    body: Callable[[RunBridge, Path], Awaitable[PlannerResult]]) -> PlannerResult:
        """Run `body(bridge, scratch_dir)` with the toolkit served and the operator inbox open."""
        self.inbox = OperatorInbox(input_queue, on_abort=lambda reason: self.control.request_stop(
            PlannerStatus.ABORTED, f"operator abort: {reason}"))
        with tempfile.TemporaryDirectory(prefix=scratch_prefix) as scratch:
            bridge = RunBridge(self.toolkit, name=self.p.server_name, inline_images=self.p.inline_images,
                               take_messages=self.inbox.take_messages, on_call_done=self.call_done,
                               admit=self.admit, on_record=self.transcript.append)
            self.control.bridge = bridge
            self.inbox.start()
            try:
                with bridge:
                    return await body(bridge, Path(scratch))
            finally:
                await asyncio.to_thread(self.inbox.stop)

    # -- bridge hooks (server thread) -------------------------------------------------------------
    def admit(self, name: str, arguments: dict[str, Any]) -> str | None:
        """A refusal text for a call about to run, or None to let it run."""
        return None

    def call_done(self, name: str) -> None:
        if self.toolkit.finish_result is not None:
            self.control.request_stop(PlannerStatus.FINISHED, "finish accepted")

    # -- the run ----------------------------------------------------------------------------------
    async def drive(self, conversation: Coroutine[Any, Any, tuple[PlannerStatus, str] | None],
                    cli_errors: tuple[type[BaseException], ...], cli_reason: str) -> PlannerResult:
        """Race `conversation` against the stop signals; whatever ends it, stop the robot and report.

        An exception in `cli_errors` is the CLI's failure (`cli_reason`); any other is a planner bug,
        which must not lose the run's transcript either.
        """
        try:
            ok, outcome = await self.control.race(conversation)
            if ok and outcome is not None:
                self.control.request_stop(*outcome)
        except cli_errors as error:
            log.error("%s failed: %s", self.label, error)
            self.error = f"{type(error).__name__}: {error}"
            self.control.request_stop(PlannerStatus.ERROR, cli_reason)
        except Exception as error:
            log.exception("%s planner failed", self.label)
            self.error = f"{type(error).__name__}: {error}"
            self.control.request_stop(PlannerStatus.ERROR, "internal planner error")
        finally:
            if self.control.status is None:
                self.control.request_stop(PlannerStatus.TIME_LIMIT,
                                          f"max_wall_time_s ({self.p.max_wall_time_s}) reached")
            await self.control.halt()
            await self.wind_down()
        return self.result()

    async def wind_down(self) -> None:
        """After the robot has stopped: release the CLI, collect late figures."""

    def follow_up(self) -> str | None:
        """What to send when the model ended its turn unfinished: operator messages, else a nudge, else None."""
        pending = self.inbox.take_messages() if self.inbox is not None else []
        if pending:
            return operator_note(pending)
        if self._nudges_left > 0:
            self._nudges_left -= 1
            return NUDGE_TEXT
        return None

    def result(self) -> PlannerResult:
        finish = self.toolkit.finish_result
        status, reason = self.control.status, self.control.reason
        if finish is not None and status is not PlannerStatus.ABORTED:
            status, reason = PlannerStatus.FINISHED, "finish accepted"
        return PlannerResult(
            status=status, stop_reason=reason, finish_result=dict(finish) if finish is not None else None,
            turns=self.turns, usage=self.usage, transcript=self.transcript, error=self.error,
        )


MODEL_ENDED = (PlannerStatus.MODEL_ENDED, "the model ended its turn without finishing")
