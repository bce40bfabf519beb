"""RobotAgent: a conversation with a model that uses the tools of the MCP servers in `.mcp.json`.

```python
async with RobotAgent(None, ".mcp.json", "You operate the toy arm.") as agent:
    text = await agent.chat("Put the red block in the bin.", on_tool_call=print)
    print(text, agent.last_result.stop_reason)
```

Call-compatible with beambot's RobotAgent (the six leading positional parameters, `chat() -> str`,
the callbacks); this project's options are keyword-only after them. Where it deliberately differs
(an iteration cap, `isError` passed to the model, no execution of a truncated reply), docs/mcp.md
has the table.

Everything is async (the Anthropic SDK's async client, the MCP SDK), so the agent never blocks
its event loop. Endpoint: `base_url`, else $ANTHROPIC_BASE_URL, else the public Anthropic API
(any Anthropic-compatible gateway works); key: `api_key`, else the variable named by
`api_key_env` (default ANTHROPIC_API_KEY); model: a falsy `model` means $RPENT_MODEL, else `rpent.settings.DEFAULT_MODEL`.
After its own, each is read from beambot's variables as beambot's client reads them (rpent.mcp.model_access).
Only a reply whose stream arrived whole is acted on (`rpent.message_stream`).
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import os
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import anthropic

from rpent.mcp.chat_records import (
    TOOL_NAME as _TOOL_NAME,
)
from rpent.mcp.chat_records import (
    ChatResult,
    ToolCallRecord,
    block_dict,
    check_local_tool,
    result_block,
)
from rpent.mcp.config import CONFIG_NAME, MAX_ANCESTORS, find_mcp_config, load_mcp_config
from rpent.mcp.connections import (
    ServerConnection,
    ServerStatus,
    describe_error,
    local_result_to_anthropic,
    mcp_content_to_anthropic,
)
from rpent.mcp.model_access import agent_model, endpoint_and_key
from rpent.message_stream import StreamCut, read_message
from rpent.option_checks import check_integer, check_positive

log = logging.getLogger(__name__)

LocalDispatch = Callable[[str, dict[str, Any]], Awaitable[Any]]
ToolFilter = Callable[[str, str], bool]  # (server name, tool name) -> keep?
OnToolCall = Callable[[str, dict[str, Any], str], Any]  # (name, arguments, result text), after the call
OnText = Callable[[str], Any]

LOCAL = "local"
DEFAULT_SYSTEM_PROMPT = (
    "You control real hardware through tools. Call one tool at a time when order matters, read each "
    "result (and its images) before the next step, and say plainly when a tool reports an error."
)
CANCELLED_TEXT = "Not completed: the user cancelled this request while the tool call was in progress."
CALLBACK_FAILED_TEXT = "Not run: the chat stopped because the caller's on_tool_call callback failed."
TRUNCATED_TEXT = "Not executed: your reply hit the output token limit, so this call may be incomplete."
CUT_OFF_TEXT = "The model's output was cut off on every attempt ({attempts}); none of it was run."
_MAX_RETRY_DELAY_S = 8.0


class ToolNameConflict(ValueError):
    """Two sources offer a tool with the same name; one would silently shadow the other."""


class RobotAgent:
    """A model conversation whose tools come from MCP servers (and optional local tools).

    Positional, as beambot's: `model` (falsy: $RPENT_MODEL, $BEAMBOT_MODEL, else the default); `mcp_config_path`
    (default: the nearest `.mcp.json` in `cwd` or its nine nearest ancestors); `system_prompt_prefix`
    (put before the built-in system prompt); `extra_tools` (Anthropic-format tool dicts) handled by
    `extra_dispatch(name, arguments)`, a coroutine returning text, PNG bytes, content blocks or
    JSON-able data (raising means an error result); `tool_filter(server_name, tool_name) -> bool` to
    leave MCP tools out. Keyword-only: `base_url`, `api_key`, `api_key_env`, `bearer_auth`; `max_iterations`
    (model requests per chat); `tool_timeout_s` (per MCP call; None waits as long as the robot
    takes); `connect_timeout_s` (per server); `max_retries` (the SDK's retries of failed requests,
    and as many re-sends of a request whose reply stream broke off, waiting `retry_base_delay_s`,
    doubling each time).
    """

    def __init__(
        self,
        model: str | None = None,
        mcp_config_path: str | Path | None = None,
        system_prompt_prefix: str = "",
        extra_tools: Sequence[dict[str, Any]] | None = None,
        extra_dispatch: LocalDispatch | None = None,
        tool_filter: ToolFilter | None = None,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        api_key_env: str = "ANTHROPIC_API_KEY",
        bearer_auth: bool = False,
        max_iterations: int = 25,
        max_output_tokens: int = 4096,
        max_retries: int = 2,
        retry_base_delay_s: float = 0.5,
        connect_timeout_s: float = 60.0,
        tool_timeout_s: float | None = None,
        request_timeout_s: float = 600.0,
        cwd: str | Path | None = None,
    ) -> None:
        model = agent_model(model)
        check_integer("max_iterations", max_iterations, 1)
        check_integer("max_output_tokens", max_output_tokens, 1)
        check_integer("max_retries", max_retries, 0)
        for option, seconds in (("connect_timeout_s", connect_timeout_s), ("request_timeout_s", request_timeout_s),
                                ("retry_base_delay_s", retry_base_delay_s)):
            check_positive(option, seconds, optional=False)
        check_positive("tool_timeout_s", tool_timeout_s)
        self.extra_tools = [check_local_tool(t, i) for i, t in enumerate(extra_tools or [])]
        if self.extra_tools and extra_dispatch is None:
            raise ValueError("extra_dispatch: required when extra_tools are given (it runs them)")
        base_url, key = endpoint_and_key(base_url, api_key, api_key_env)
        self.model = model
        self.mcp_config_path = Path(mcp_config_path) if mcp_config_path is not None else None
        self.system_prompt_prefix = system_prompt_prefix
        self.extra_dispatch = extra_dispatch
        self.tool_filter = tool_filter
        self.base_url = base_url
        self._api_key = key
        self.bearer_auth = bearer_auth
        self.max_iterations = max_iterations
        self.max_output_tokens = max_output_tokens
        self.max_retries = max_retries
        self.retry_base_delay_s = retry_base_delay_s
        self.connect_timeout_s = connect_timeout_s
        self.tool_timeout_s = tool_timeout_s
        self.request_timeout_s = request_timeout_s
        self.cwd = Path(cwd) if cwd is not None else None

        self.messages: list[dict[str, Any]] = []
        self.servers: dict[str, ServerStatus] = {}
        self.config_path: Path | None = None
        #: The full outcome of the latest chat() (its final text, stop reason, calls, usage).
        self.last_result: ChatResult | None = None
        self._connections: dict[str, ServerConnection] = {}
        self._routes: dict[str, str] = {}  # tool name -> server name or LOCAL
        self._tools: list[dict[str, Any]] = []
        self._client: anthropic.AsyncAnthropic | None = None
        self._chat_lock = asyncio.Lock()

    # -- lifecycle --------------------------------------------------------------------------
    async def connect(self) -> dict[str, ServerStatus]:
        """Start every configured server (side by side), collect their tools, register local tools.

        A server that fails to start is reported in the returned statuses (and `servers`) and
        logged; the others are used. Raises ToolNameConflict if two sources offer one name, and
        FileNotFoundError if there is no config file to read and no local tool either.
        """
        if self._client is not None:
            raise RuntimeError("connect: already connected (call disconnect() first)")
        path = self.mcp_config_path or find_mcp_config(self.cwd)
        if path is None and not self.extra_tools:
            # Nothing to offer the model: a script run from the wrong folder should say so, not chat toolless.
            raise FileNotFoundError(
                f"mcp_config_path: no {CONFIG_NAME} in {self.cwd or os.getcwd()} or its {MAX_ANCESTORS} nearest "
                "ancestors; pass mcp_config_path or extra_tools")
        configs = load_mcp_config(path) if path is not None else []
        self.config_path = path
        if path is None:
            log.info("no %s found from %s upwards: only local tools", CONFIG_NAME, self.cwd or os.getcwd())
        connections = [ServerConnection(c, connect_timeout_s=self.connect_timeout_s) for c in configs]
        outcomes = await asyncio.gather(*(c.start() for c in connections), return_exceptions=True)
        self.servers = {}
        for connection, outcome in zip(connections, outcomes, strict=True):
            status = ServerStatus(connection.name, connection.config.transport)
            if isinstance(outcome, BaseException):
                status.error = describe_error(outcome)
                log.warning("MCP server %s failed to start: %s", connection.name, status.error)
            else:
                status.connected = True
                self._connections[connection.name] = connection
            self.servers[connection.name] = status
        try:
            self._register_tools()
        except ToolNameConflict:
            await self._close_connections()
            raise
        credentials = {"auth_token": self._api_key} if self.bearer_auth else {"api_key": self._api_key}
        self._client = anthropic.AsyncAnthropic(base_url=self.base_url, timeout=self.request_timeout_s,
                                                max_retries=self.max_retries, **credentials)
        return dict(self.servers)

    def _register_tools(self) -> None:
        routes: dict[str, str] = {}
        tools: list[dict[str, Any]] = []

        def add(name: str, source: str, spec: dict[str, Any]) -> None:
            if name in routes:
                raise ToolNameConflict(
                    f"tool name conflict: '{name}' is offered by {_source(routes[name])} and by {_source(source)}; "
                    "drop one with tool_filter(server, tool) or rename it"
                )
            routes[name] = source
            tools.append(spec)

        for name, connection in self._connections.items():
            offered = []
            for tool in connection.tools:
                if self.tool_filter is not None and not self.tool_filter(name, tool.name):
                    continue
                if not _TOOL_NAME.match(tool.name):
                    log.warning("MCP server %s: tool %r skipped (the model API needs [a-zA-Z0-9_-]{1,128})", name, tool.name)
                    continue
                add(tool.name, name, {"name": tool.name, "description": tool.description or "",
                                      "input_schema": tool.input_schema or {"type": "object"}})
                offered.append(tool.name)
            self.servers[name].tools = offered
        for spec in self.extra_tools:
            add(spec["name"], LOCAL, spec)
        self._routes, self._tools = routes, tools

    async def disconnect(self) -> None:
        """Close every MCP session (stdio servers exit and are reaped) and the model HTTP client."""
        await self._close_connections()
        client, self._client = self._client, None
        if client is not None:
            await client.close()

    async def _close_connections(self) -> None:
        connections, self._connections = list(self._connections.values()), {}
        await asyncio.gather(*(c.close() for c in connections), return_exceptions=True)
        self._routes, self._tools = {}, []

    async def __aenter__(self) -> RobotAgent:
        await self.connect()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.disconnect()

    # -- conversation -----------------------------------------------------------------------
    @property
    def tools(self) -> list[dict[str, Any]]:
        """The tools offered to the model (Anthropic format), MCP tools first."""
        return list(self._tools)

    def clear_history(self) -> None:
        self.messages = []

    def system_prompt(self) -> str:
        return f"{self.system_prompt_prefix.strip()}\n\n{DEFAULT_SYSTEM_PROMPT}".strip()

    async def chat(self, user_message: str, on_tool_call: OnToolCall | None = None,
                   on_text: OnText | None = None) -> str:
        """Send `user_message`, let the model use tools until it ends its turn; return its final text.

        `on_tool_call(name, arguments, result_text)` is called after each call, `on_text(text)` once
        with the final text; either may be a coroutine function. The whole outcome (stop reason,
        calls, usage) is `last_result`. If this coroutine is cancelled, the running MCP call is
        cancelled on its server (that call only) and the history stays valid.
        """
        return (await self.chat_result(user_message, on_tool_call, on_text)).text

    async def chat_result(self, user_message: str, on_tool_call: OnToolCall | None = None,
                          on_text: OnText | None = None) -> ChatResult:
        """chat(), returning the whole ChatResult instead of its text."""
        if self._client is None:
            raise RuntimeError("chat: not connected (call connect() first)")
        if not isinstance(user_message, str) or not user_message.strip():
            raise ValueError("user_message: must be non-empty text")
        async with self._chat_lock:
            result = await self._chat(user_message, on_tool_call)
            self.last_result = result
            if on_text is not None:
                await _maybe_await(on_text(result.text))
            return result

    async def _chat(self, message: str, on_tool_call: OnToolCall | None) -> ChatResult:
        self._add_user([{"type": "text", "text": message}])
        records: list[ToolCallRecord] = []
        discarded: list[dict[str, Any]] = []
        usage = [0, 0]
        for iteration in range(1, self.max_iterations + 1):
            try:
                reply = await self._request(discarded)
            except StreamCut:
                text = CUT_OFF_TEXT.format(attempts=len(discarded))
                return ChatResult(text, "output_cut_off", iteration, records, *usage, discarded=discarded)
            usage[0] += reply.usage.input_tokens or 0
            usage[1] += reply.usage.output_tokens or 0
            blocks = [block_dict(b) for b in reply.content if not (b.type == "text" and not b.text)]
            if blocks:
                self.messages.append({"role": "assistant", "content": blocks})
            tool_uses = [b for b in blocks if b["type"] == "tool_use"]
            if not tool_uses:
                text = "".join(b["text"] for b in blocks if b["type"] == "text")
                stop_reason = reply.stop_reason or "end_turn"
                return ChatResult(text, stop_reason, iteration, records, *usage, discarded=discarded)
            if reply.stop_reason == "max_tokens":
                # A reply cut off mid-call may carry truncated arguments: never run it on a robot.
                self._add_user([result_block(b["id"], [{"type": "text", "text": TRUNCATED_TEXT}], True) for b in tool_uses])
                continue
            self._add_user(await self._run_tools(tool_uses, on_tool_call, records))
        log.warning("chat stopped after max_iterations (%d) model requests", self.max_iterations)
        return ChatResult(f"Stopped after {self.max_iterations} model requests (max_iterations) without finishing.",
                          "max_iterations", self.max_iterations, records, *usage, discarded=discarded)

    async def _request(self, discarded: list[dict[str, Any]]) -> Any:
        request: dict[str, Any] = {
            "model": self.model, "max_tokens": self.max_output_tokens, "system": self.system_prompt(),
            "messages": self.messages,
        }
        if self._tools:
            request["tools"] = self._tools
        return await self._whole_reply(request, discarded)

    async def _whole_reply(self, request: dict[str, Any], discarded: list[dict[str, Any]]) -> Any:
        """A reply that arrived whole. A cut one goes to `discarded` and the request is sent again, as
        the SDK re-sends one whose connection failed; StreamCut once `max_retries` re-sends were cut too."""
        assert self._client is not None
        attempt = 0
        while True:
            try:
                return await read_message(self._client, request, None)
            except StreamCut as cut:
                discarded.append(cut.record())
                if attempt >= self.max_retries:
                    raise
                delay = min(self.retry_base_delay_s * 2**attempt, _MAX_RETRY_DELAY_S)
                attempt += 1
                log.warning("%s; retry %d/%d in %.2f s", cut, attempt, self.max_retries, delay)
                await asyncio.sleep(delay)

    async def _run_tools(self, tool_uses: list[dict[str, Any]], on_tool_call: OnToolCall | None,
                         records: list[ToolCallRecord]) -> list[dict[str, Any]]:
        """Run the calls one after another, in the model's order (robot actions do not commute)."""
        results: list[dict[str, Any]] = []
        try:
            for block in tool_uses:
                name, arguments = block["name"], dict(block.get("input") or {})
                record = await self.call_tool(name, arguments)
                records.append(record)
                results.append(result_block(block["id"], record.content, record.is_error))
                if on_tool_call is not None:
                    await _maybe_await(on_tool_call(name, arguments, record.text))
        except BaseException as exc:
            # Every tool_use needs its tool_result, or the next request is refused.
            text = CANCELLED_TEXT if isinstance(exc, asyncio.CancelledError) else CALLBACK_FAILED_TEXT
            for block in tool_uses[len(results):]:
                results.append(result_block(block["id"], [{"type": "text", "text": text}], True))
            self._add_user(results)
            raise
        return results

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> ToolCallRecord:
        """Call one tool by name (MCP or local) without the model; errors come back as is_error records."""
        source = self._routes.get(name)
        started = time.perf_counter()
        if source is None:
            content = [{"type": "text", "text": f"unknown tool '{name}' (available: {', '.join(self._routes) or 'none'})"}]
            return ToolCallRecord(name, "", arguments, content, True, 0.0)
        is_error = False
        try:
            if source == LOCAL:
                assert self.extra_dispatch is not None
                content = local_result_to_anthropic(await self.extra_dispatch(name, arguments))
            else:
                result = await self._connections[source].call(name, arguments, self.tool_timeout_s)
                content = mcp_content_to_anthropic(result.content)
                is_error = bool(result.is_error)
        except Exception as exc:
            where = "local tool" if source == LOCAL else f"MCP server '{source}'"
            content = [{"type": "text", "text": f"{where} failed: {describe_error(exc)}"}]
            is_error = True
        return ToolCallRecord(name, source, arguments, content, is_error, time.perf_counter() - started)

    def _add_user(self, content: list[dict[str, Any]]) -> None:
        if self.messages and self.messages[-1]["role"] == "user":
            # e.g. a chat cancelled during a model request, then a new message: one user turn.
            self.messages[-1]["content"].extend(content)
        else:
            self.messages.append({"role": "user", "content": list(content)})


def _source(source: str) -> str:
    return "extra_tools" if source == LOCAL else f"MCP server '{source}'"


async def _maybe_await(value: Any) -> None:
    if inspect.isawaitable(value):
        await value
