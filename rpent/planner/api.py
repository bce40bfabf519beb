"""The `api` planner: a tool-use loop on the Anthropic Messages API through the official SDK.

The loop runs on its own asyncio event loop (the async client never blocks it); tool calls run in
the toolkit's worker threads through `rpent.planner.base.execute_tool`. Works against any
Anthropic-compatible endpoint (base URL, key variable and model are options). Only a reply whose
stream arrived whole is acted on (`rpent.message_stream`): a cut one is recorded as discarded and
the request retried like a dropped connection.
"""

from __future__ import annotations

import asyncio
import logging
import queue
import time
from collections.abc import Callable
from typing import Any

import anthropic

from rpent.message_stream import StreamCut, read_message
from rpent.option_checks import check_integer, check_positive
from rpent.planner.api_wire import (
    CACHE,
    backoff_delay,
    block_dict,
    describe,
    requested_wait,
    retryable,
    tool_result_blocks,
    with_cache_breakpoint,
)
from rpent.planner.base import (
    AsyncPlanner,
    OperatorInbox,
    OperatorInput,
    PlannerResult,
    PlannerStatus,
    TokenUsage,
    execute_tool,
)
from rpent.settings import DEFAULT_MODEL, api_key_from, chosen_model
from rpent.tools.api import ToolkitAPI
from rpent.tools.result import ToolResult

__all__ = ["DEFAULT_MAX_RETRY_WAIT_S", "DEFAULT_MODEL", "ApiPlanner"]

#: The longest Retry-After the planner honours; a service asking for more ends the run (docs/planners.md).
DEFAULT_MAX_RETRY_WAIT_S = 60.0

log = logging.getLogger(__name__)

NUDGE_TEXT = (
    "You ended your turn without calling the finish tool, so the task is still open. "
    "Continue working, or call the finish tool to report the outcome."
)
TRUNCATED_CALL_TEXT = (
    "Not executed: your reply hit the output token limit, so this call may be incomplete. "
    "Send it again with less text around it."
)


class _Stop(Exception):
    def __init__(self, status: PlannerStatus, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


class ApiPlanner(AsyncPlanner):
    """Anthropic Messages API planner.

    Options: `model`, `base_url` (default: $ANTHROPIC_BASE_URL or the public API), `api_key`
    (default: the variable named by `api_key_env`), `bearer_auth` (send the key as
    `Authorization: Bearer`, for gateways), limits (`max_output_tokens` per reply,
    `max_wall_time_s`, `max_total_tokens`), retry policy (`max_retries`, backoff from
    `retry_base_delay_s` up to `retry_max_delay_s`, the service's Retry-After honoured up to
    `max_retry_wait_s`, beyond which the run ends at once), `end_turn_nudges` (how often a model
    that stops without finishing is reminded), `prompt_caching`, and `on_text` (called on the
    event-loop thread with each streamed text fragment; keep it quick).
    """

    name = "api"

    def __init__(
        self,
        *,
        model: str | None = None,
        base_url: str | None = None,
        api_key: str | None = None,
        api_key_env: str = "ANTHROPIC_API_KEY",
        bearer_auth: bool = False,
        default_headers: dict[str, str] | None = None,
        max_output_tokens: int = 8192,
        max_wall_time_s: float | None = None,
        max_total_tokens: int | None = None,
        max_retries: int = 6,
        retry_base_delay_s: float = 1.0,
        retry_max_delay_s: float = 30.0,
        max_retry_wait_s: float = DEFAULT_MAX_RETRY_WAIT_S,
        request_timeout_s: float = 600.0,
        end_turn_nudges: int = 1,
        prompt_caching: bool = True,
        on_text: Callable[[str], Any] | None = None,
    ) -> None:
        model = chosen_model(model)
        check_integer("max_output_tokens", max_output_tokens, 1)
        check_integer("max_retries", max_retries, 0)
        check_integer("end_turn_nudges", end_turn_nudges, 0)
        check_positive("max_wall_time_s", max_wall_time_s)
        check_positive("max_total_tokens", max_total_tokens)
        check_positive("retry_base_delay_s", retry_base_delay_s, optional=False)
        check_positive("retry_max_delay_s", retry_max_delay_s, optional=False)
        check_positive("max_retry_wait_s", max_retry_wait_s, optional=False)
        check_positive("request_timeout_s", request_timeout_s, optional=False)
        key = api_key_from(api_key, api_key_env)
        self.model = model
        self.base_url = base_url
        self._api_key = key
        self.bearer_auth = bearer_auth
        self.default_headers = dict(default_headers or {})
        self.max_output_tokens = max_output_tokens
        self.max_wall_time_s = max_wall_time_s
        self.max_total_tokens = max_total_tokens
        self.max_retries = max_retries
        self.retry_base_delay_s = retry_base_delay_s
        self.retry_max_delay_s = retry_max_delay_s
        self.max_retry_wait_s = max_retry_wait_s
        self.request_timeout_s = request_timeout_s
        self.end_turn_nudges = end_turn_nudges
        self.prompt_caching = prompt_caching
        self.on_text = on_text
        self.transcript: list[dict[str, Any]] = []

    def _client(self) -> anthropic.AsyncAnthropic:
        credentials = {"auth_token": self._api_key} if self.bearer_auth else {"api_key": self._api_key}
        # Retries are ours (one policy for HTTP errors and errors inside a stream), so the SDK's are off.
        return anthropic.AsyncAnthropic(
            base_url=self.base_url, max_retries=0, timeout=self.request_timeout_s,
            default_headers=self.default_headers or None, **credentials,
        )

    async def _solve(self, system_prompt: str, user_message: str, toolkit: ToolkitAPI, max_turns: int,
                     input_queue: queue.Queue[OperatorInput] | None) -> PlannerResult:
        async with self._client() as client:
            run = _Run(self, client, toolkit, system_prompt, max_turns, input_queue)
            self.transcript = run.transcript  # live view for a dashboard or a crash handler
            run.inbox.start()
            try:
                return await run.run(user_message)
            finally:
                await asyncio.to_thread(run.inbox.stop)


class _Run:
    """The state of one solve() call: conversation, transcript, budget, operator inbox."""

    def __init__(self, planner: ApiPlanner, client: anthropic.AsyncAnthropic, toolkit: ToolkitAPI,
                 system_prompt: str, max_turns: int, input_queue: queue.Queue[OperatorInput] | None) -> None:
        self.p = planner
        self.client = client
        self.toolkit = toolkit
        self.max_turns = max_turns
        self.messages: list[dict[str, Any]] = []     # what the API sees (images inline)
        self.transcript: list[dict[str, Any]] = []   # what is written to disk (images as paths)
        self._user_record: list[dict[str, Any]] = []  # content of the newest user entry in the transcript
        self.usage = TokenUsage()
        self.turns = 0
        self.started = time.monotonic()
        self.system = [{"type": "text", "text": system_prompt}]
        tools = [{"name": t.name, "description": t.description, "input_schema": t.input_schema}
                 for t in toolkit.list_tools(include_read_image=True)]
        if planner.prompt_caching:
            self.system[0]["cache_control"] = CACHE
            if tools:
                tools[-1]["cache_control"] = CACHE
        self.tools = tools
        self.transcript.append({"role": "system", "content": system_prompt})
        self._abort = asyncio.Event()
        loop = asyncio.get_running_loop()
        self.inbox = OperatorInbox(input_queue, on_abort=lambda _: loop.call_soon_threadsafe(self._abort.set))

    # -- main loop ----------------------------------------------------------------------------
    async def run(self, user_message: str) -> PlannerResult:
        self._add_user([{"type": "text", "text": user_message}])
        nudges_left = self.p.end_turn_nudges
        try:
            while True:
                self._check_limits()
                message = await self._guarded(self._request())
                reply = self._add_assistant(message)
                stop = message.stop_reason
                tool_uses = [b for b in reply if b["type"] == "tool_use"]
                if stop == "refusal":
                    return self._result(PlannerStatus.REFUSED, "the model refused to continue")
                if stop == "model_context_window_exceeded":
                    return self._result(PlannerStatus.ERROR, "the conversation no longer fits the model's context")
                if stop == "max_tokens":
                    # A reply cut off mid-call may carry truncated arguments: never run it on a robot.
                    content: list[dict[str, Any]] = [
                        tool_result_blocks(b["id"], ToolResult(error=TRUNCATED_CALL_TEXT))[0]
                        for b in tool_uses
                    ] or [{"type": "text", "text": "Your reply hit the output token limit; continue concisely."}]
                    self._add_user(content, operator=self.inbox.take_messages())
                elif tool_uses:
                    results = await self._guarded(self._run_tools(tool_uses))
                    self._add_tool_results(tool_uses, results)
                    if self.toolkit.finish_result is not None:
                        return self._result(PlannerStatus.FINISHED, "finish accepted")
                elif stop == "pause_turn":
                    continue  # the service paused a long turn: send the conversation back as is
                elif stop in ("end_turn", "stop_sequence", None):
                    operator = self.inbox.take_messages()
                    if operator:
                        self._add_user([], operator=operator)
                    elif nudges_left > 0:
                        nudges_left -= 1
                        self._add_user([{"type": "text", "text": NUDGE_TEXT}])
                    else:
                        return self._result(PlannerStatus.MODEL_ENDED, "the model ended its turn without finishing")
                else:
                    return self._result(PlannerStatus.ERROR, f"unhandled stop_reason {stop!r}")
        except _Stop as stop_:
            return self._result(stop_.status, stop_.reason)
        except StreamCut as cut:
            return self._result(PlannerStatus.ERROR, "the model's output was cut off and the retries are "
                                "used up; none of it was run", cut)
        except (anthropic.APIError, ValueError) as error:
            log.error("model request failed: %s", error)
            return self._result(PlannerStatus.ERROR, "the model service failed", error)
        except Exception as error:  # a planner bug must not lose the run's transcript
            log.exception("planner loop failed")
            return self._result(PlannerStatus.ERROR, "internal planner error", error)

    def _check_limits(self) -> None:
        if self._abort.is_set():
            raise _Stop(PlannerStatus.ABORTED, f"operator abort: {self.inbox.abort_reason}")
        if self.turns >= self.max_turns:
            raise _Stop(PlannerStatus.TURN_LIMIT, f"max_turns ({self.max_turns}) reached without a finish")
        if self.p.max_total_tokens is not None and self.usage.total_tokens >= self.p.max_total_tokens:
            raise _Stop(PlannerStatus.TOKEN_LIMIT, f"max_total_tokens ({self.p.max_total_tokens}) used up")
        if self._remaining_time() == 0:
            raise _Stop(PlannerStatus.TIME_LIMIT, f"max_wall_time_s ({self.p.max_wall_time_s}) reached")

    def _remaining_time(self) -> float | None:
        if self.p.max_wall_time_s is None:
            return None
        return max(0.0, self.p.max_wall_time_s - (time.monotonic() - self.started))

    async def _guarded(self, step: Any) -> Any:
        """Run one step (a model request or a batch of tool calls) until done, abort or deadline.

        On abort or deadline the step is cancelled and awaited, so running tool calls have been
        cancelled and have returned (robot stopped) before the run ends.
        """
        task = asyncio.ensure_future(step)
        abort = asyncio.ensure_future(self._abort.wait())
        try:
            done, _ = await asyncio.wait({task, abort}, timeout=self._remaining_time(),
                                         return_when=asyncio.FIRST_COMPLETED)
        finally:
            abort.cancel()
        if task in done:
            return task.result()
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            pass
        except Exception as error:  # the step failed while being cancelled; the stop still stands
            log.warning("step failed during cancellation: %s", error)
        if self._abort.is_set():
            raise _Stop(PlannerStatus.ABORTED, f"operator abort: {self.inbox.abort_reason}")
        raise _Stop(PlannerStatus.TIME_LIMIT, f"max_wall_time_s ({self.p.max_wall_time_s}) reached")

    # -- model requests -----------------------------------------------------------------------
    async def _request(self) -> Any:
        request = {
            "model": self.p.model, "max_tokens": self.p.max_output_tokens, "system": self.system,
            "tools": self.tools, "messages": with_cache_breakpoint(self.messages) if self.p.prompt_caching else self.messages,
        }
        attempt = 0
        while True:
            try:
                message = await read_message(self.client, request, self._on_text)
                break
            except (anthropic.APIConnectionError, anthropic.APIStatusError, StreamCut) as error:
                if isinstance(error, StreamCut):
                    # Never acted on, but kept: the transcript shows what the model had begun to do.
                    self.transcript.append(error.record())
                if attempt >= self.p.max_retries or not retryable(error):
                    raise
                asked = requested_wait(error)
                if asked is not None and asked > self.p.max_retry_wait_s:
                    # A gateway must not hold a run (and a robot waiting on it) for hours.
                    reason = (f"the model service ({describe(error)}) asks to retry in {asked:g} s, more than the "
                              f"{self.p.max_retry_wait_s:g} s the api planner waits (max_retry_wait_s); giving up")
                    log.error("%s", reason)
                    raise _Stop(PlannerStatus.ERROR, reason) from error
                delay = asked if asked is not None else backoff_delay(
                    attempt, self.p.retry_base_delay_s, self.p.retry_max_delay_s)
                attempt += 1
                log.warning("model request failed (%s); retry %d/%d in %.2f s%s", describe(error), attempt,
                            self.p.max_retries, delay, " (the service's Retry-After)" if asked is not None else "")
                await asyncio.sleep(delay)
        self.turns += 1
        usage = message.usage
        self.usage.add(TokenUsage(
            input_tokens=usage.input_tokens or 0, output_tokens=usage.output_tokens or 0,
            cache_creation_input_tokens=usage.cache_creation_input_tokens or 0,
            cache_read_input_tokens=usage.cache_read_input_tokens or 0,
        ))
        return message

    async def _on_text(self, text: str) -> None:
        if self.p.on_text is None:
            return
        try:
            self.p.on_text(text)
        except Exception:  # a broken display must not break the run
            log.exception("on_text callback failed")

    # -- tools --------------------------------------------------------------------------------
    async def _run_tools(self, tool_uses: list[dict[str, Any]]) -> list[ToolResult]:
        async def one(block: dict[str, Any]) -> ToolResult:
            try:
                return await execute_tool(self.toolkit, block["name"], block["input"])
            except Exception as error:  # submit failed (e.g. toolkit closed): tell the model
                return ToolResult(error=f"{type(error).__name__}: {error}")

        # Tasks start in block order, so the toolkit queues the calls in the order the model gave.
        tasks = [asyncio.ensure_future(one(block)) for block in tool_uses]
        try:
            await asyncio.wait(tasks)
        except asyncio.CancelledError:
            for task in tasks:
                task.cancel()
            # Every call must have returned (robot stopped) before the cancellation goes on.
            while not all(task.done() for task in tasks):
                try:
                    await asyncio.wait(tasks)
                except asyncio.CancelledError:
                    continue
            raise
        return [task.result() for task in tasks]

    def _add_tool_results(self, tool_uses: list[dict[str, Any]], results: list[ToolResult]) -> None:
        pairs = [tool_result_blocks(b["id"], r) for b, r in zip(tool_uses, results, strict=True)]
        self._add_user([api for api, _ in pairs], [record for _, record in pairs],
                       operator=self.inbox.take_messages())

    # -- conversation -------------------------------------------------------------------------
    def _add_user(self, content: list[dict[str, Any]], record: list[dict[str, Any]] | None = None,
                  *, operator: list[str] = ()) -> None:
        notes = [{"type": "text", "text": f"Message from the operator: {text}"} for text in operator]
        api = [*content, *notes]
        recorded = [*(content if record is None else record), *notes]
        if self.messages and self.messages[-1]["role"] == "user":
            # Consecutive user turns (e.g. after an empty assistant reply) are merged into one; the
            # transcript may have entries after that turn's record (the empty reply, discarded ones).
            self.messages[-1]["content"].extend(api)
            self._user_record.extend(recorded)
        else:
            self.messages.append({"role": "user", "content": api})
            self._user_record = recorded
            self.transcript.append({"role": "user", "content": recorded})

    def _add_assistant(self, message: Any) -> list[dict[str, Any]]:
        # The API rejects empty text blocks when they are sent back.
        blocks = [block_dict(b) for b in message.content if not (b.type == "text" and not b.text)]
        entry = {"role": "assistant", "content": blocks}
        if blocks:
            self.messages.append(entry)
        self.transcript.append(dict(entry, stop_reason=message.stop_reason))
        return blocks

    def _result(self, status: PlannerStatus, reason: str, error: Exception | None = None) -> PlannerResult:
        finish = self.toolkit.finish_result
        return PlannerResult(
            status=status, stop_reason=reason, finish_result=dict(finish) if finish is not None else None,
            turns=self.turns, usage=self.usage, transcript=self.transcript,
            error=f"{type(error).__name__}: {error}" if error is not None else None,
        )
