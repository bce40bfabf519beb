"""The `claude_code` planner: Claude Code (through claude-agent-sdk) driving the toolkit over MCP.

The toolkit is served to the CLI from this process (rpent.planner.cli_common.RunBridge). Claude
Code sees the robot's tools as `mcp__<server>__<tool>` and, instead of `read_image`, its own Read
tool, which is allowed only inside the run's output and memory directories. Every other built-in
tool (shell, web, file writing) is off unless listed in `extra_builtin_tools`.
"""

from __future__ import annotations

import asyncio
import logging
import os
import queue
import warnings
from pathlib import Path
from typing import Any

from rpent.option_checks import check_integer, check_positive
from rpent.planner.base import AsyncPlanner, OperatorInput, PlannerResult, PlannerStatus, TokenUsage
from rpent.planner.cli_common import CliError, RunBridge, inside
from rpent.planner.cli_run import MODEL_ENDED, CliRun
from rpent.settings import api_key_from, chosen_model
from rpent.tools.api import ToolkitAPI

log = logging.getLogger(__name__)

#: Tools that read files; each is allowed only on paths inside the run's directories.
_READ_TOOLS = {"Read": "file_path"}


class ClaudeCodePlanner(AsyncPlanner):
    """Claude Code as the planner.

    Options: `model`, `base_url` (default: $ANTHROPIC_BASE_URL, else the public API), `api_key`
    (default: the variable named by `api_key_env`), `max_wall_time_s`, `cli_path` (default: the
    CLI bundled in claude-agent-sdk), `server_name` (MCP server name, tools are
    `mcp__<server_name>__<tool>`), `allow_read` (the Read tool for the saved PNGs and memory),
    `extra_builtin_tools` (more built-in tools, e.g. ["Bash"]: off by default on a robot),
    `inline_images` (MCP image blocks beside the PNG paths), `end_turn_nudges`, `isolated_home`
    (a scratch HOME and config dir per run, so personal settings, hooks and MCP servers never
    apply; turn off to use a logged-in account), `env` (more variables for the CLI), `stderr`
    (callback per CLI stderr line).
    """

    name = "claude_code"

    def __init__(
        self,
        *,
        model: str | None = None,
        base_url: str | None = None,
        api_key: str | None = None,
        api_key_env: str = "ANTHROPIC_API_KEY",
        max_wall_time_s: float | None = None,
        cli_path: str | os.PathLike[str] | None = None,
        server_name: str = "robot",
        allow_read: bool = True,
        extra_builtin_tools: list[str] | tuple[str, ...] = (),
        inline_images: bool = True,
        end_turn_nudges: int = 1,
        isolated_home: bool = True,
        env: dict[str, str] | None = None,
        stderr: Any = None,
    ) -> None:
        model = chosen_model(model)
        if not isinstance(server_name, str) or not server_name.replace("_", "").replace("-", "").isalnum():
            raise ValueError(f"server_name: must be letters, digits, '_' or '-', got {server_name!r}")
        check_integer("end_turn_nudges", end_turn_nudges, 0)
        check_positive("max_wall_time_s", max_wall_time_s)
        # Without an isolated home the CLI may use the account it is logged in with.
        key = api_key_from(api_key, api_key_env, required=isolated_home)
        try:
            import claude_agent_sdk  # noqa: F401
        except ImportError as exc:
            raise ValueError("planner claude_code: needs claude-agent-sdk (pip install claude-agent-sdk==0.2.184)") from exc
        self.model = model
        self.base_url = base_url
        self._api_key = key
        self.max_wall_time_s = max_wall_time_s
        self.cli_path = str(cli_path) if cli_path else None
        self.server_name = server_name
        self.allow_read = allow_read
        self.extra_builtin_tools = list(extra_builtin_tools)
        self.inline_images = inline_images
        self.end_turn_nudges = end_turn_nudges
        self.isolated_home = isolated_home
        self.env = dict(env or {})
        self.stderr = stderr
        self.transcript: list[dict[str, Any]] = []

    def cli_env(self, home: Path) -> dict[str, str]:
        env = {
            # Without this the CLI defers MCP tools behind its ToolSearch tool and never offers them.
            "ENABLE_TOOL_SEARCH": "false",
            # Without this the first request can go out before the robot's tools are listed.
            "MCP_CONNECTION_NONBLOCKING": "0",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "DISABLE_TELEMETRY": "1",
            "DISABLE_AUTOUPDATER": "1",
        }
        if self._api_key:
            env["ANTHROPIC_API_KEY"] = self._api_key
        if self.base_url:
            env["ANTHROPIC_BASE_URL"] = self.base_url
        if self.isolated_home:
            env["HOME"] = str(home)
            env["CLAUDE_CONFIG_DIR"] = str(home / ".claude")
        env.update(self.env)
        return env

    async def _solve(self, system_prompt: str, user_message: str, toolkit: ToolkitAPI, max_turns: int,
                     input_queue: queue.Queue[OperatorInput] | None) -> PlannerResult:
        run = _Run(self, toolkit, system_prompt, max_turns)
        self.transcript = run.transcript
        return await run.serve(input_queue, "rpent-claude-code-",
                               lambda bridge, scratch: run.run(user_message, bridge, scratch))


class _Run(CliRun):
    """One solve() call: the Claude Code session on top of the shared run state."""

    label = "Claude Code"
    p: ClaudeCodePlanner

    def __init__(self, planner: ClaudeCodePlanner, toolkit: ToolkitAPI, system_prompt: str, max_turns: int) -> None:
        super().__init__(planner, toolkit, system_prompt, max_turns)
        self.usage_by_message: dict[str, TokenUsage] = {}
        self.session_id: str | None = None
        self._client: Any = None

    @property
    def turns(self) -> int:
        return len(self.usage_by_message)

    @property
    def usage(self) -> TokenUsage:
        total = TokenUsage()
        for usage in self.usage_by_message.values():
            total.add(usage)
        return total

    async def can_use_tool(self, tool_name: str, tool_input: dict[str, Any], context: Any) -> Any:
        from claude_agent_sdk import PermissionResultAllow, PermissionResultDeny

        if tool_name.startswith(f"mcp__{self.p.server_name}__"):
            return PermissionResultAllow()
        key = _READ_TOOLS.get(tool_name)
        if key is not None:
            path = tool_input.get(key)
            if isinstance(path, str) and inside(path, self.roots):
                return PermissionResultAllow()
            where = ", ".join(str(r) for r in self.roots) or "nowhere (this run has no output directory)"
            return PermissionResultDeny(message=f"{tool_name} is limited to the run's directories: {where}")
        if tool_name in self.p.extra_builtin_tools:
            return PermissionResultAllow()
        return PermissionResultDeny(message=f"{tool_name} is not allowed while driving a robot")

    async def check_read(self, hook_input: Any, tool_use_id: str | None, context: Any) -> dict[str, Any]:
        """PreToolUse hook: runs even where Claude Code would allow a Read by itself (e.g. its cwd)."""
        tool_name = hook_input.get("tool_name", "")
        key = _READ_TOOLS.get(tool_name)
        if key is None:
            return {}
        path = (hook_input.get("tool_input") or {}).get(key)
        if isinstance(path, str) and inside(path, self.roots):
            return {}
        where = ", ".join(str(r) for r in self.roots) or "nowhere (this run has no output directory)"
        return {"hookSpecificOutput": {
            "hookEventName": "PreToolUse", "permissionDecision": "deny",
            "permissionDecisionReason": f"{tool_name} is limited to the run's directories: {where}",
        }}

    def options(self, bridge: RunBridge, scratch: Path) -> Any:
        from claude_agent_sdk import ClaudeAgentOptions, HookMatcher

        home = scratch / "home"
        home.mkdir()
        builtin = (["Read"] if self.p.allow_read and self.roots else []) + self.p.extra_builtin_tools
        cwd = self.roots[0] if self.roots else scratch
        return ClaudeAgentOptions(
            tools=builtin,
            # Robot tools run without a permission round trip (it cost ~70 ms a call); everything
            # else, Read included, goes through can_use_tool and its path check.
            allowed_tools=[f"mcp__{self.p.server_name}__{name}" for name in bridge.tool_names],
            mcp_servers={self.p.server_name: {"type": "http", "url": bridge.url}},
            strict_mcp_config=True,
            setting_sources=[],
            system_prompt=self.system_prompt,
            model=self.p.model,
            max_turns=self.max_turns,
            permission_mode="default",
            can_use_tool=self.can_use_tool,
            hooks={"PreToolUse": [HookMatcher(matcher="|".join(_READ_TOOLS), hooks=[self.check_read],
                                              on_failure="block")]},
            cwd=str(cwd),
            add_dirs=[str(r) for r in self.roots[1:]],
            env=self.p.cli_env(home),
            cli_path=self.p.cli_path,
            stderr=self.p.stderr or (lambda line: log.debug("claude: %s", line.rstrip())),
        )

    async def run(self, user_message: str, bridge: RunBridge, scratch: Path) -> PlannerResult:
        from claude_agent_sdk import ClaudeSDKClient
        from claude_agent_sdk._errors import ClaudeSDKError

        self._client = ClaudeSDKClient(self.options(bridge, scratch))
        return await self.drive(self._session(user_message), (ClaudeSDKError, CliError, OSError),
                                "the Claude Code CLI failed")

    async def wind_down(self) -> None:
        try:
            await asyncio.wait_for(self._client.disconnect(), 30)
        except Exception as error:
            log.warning("disconnecting Claude Code: %s", error)

    async def _session(self, message: str) -> tuple[PlannerStatus, str]:
        await _connect(self._client)
        while True:
            self.transcript.append({"role": "user", "content": message})
            await self._client.query(message)
            result = await self._read_turn(self._client)
            if result.subtype == "error_max_turns":
                return PlannerStatus.TURN_LIMIT, f"max_turns ({self.max_turns}) reached without a finish"
            if result.is_error:
                self.error = "; ".join(result.errors or []) or str(result.result)
                return PlannerStatus.ERROR, f"Claude Code reported an error ({result.subtype}; e.g. the model service failed)"
            follow_up = self.follow_up()
            if follow_up is None:
                return MODEL_ENDED
            message = follow_up

    async def _read_turn(self, client: Any) -> Any:
        from claude_agent_sdk import AssistantMessage, ResultMessage, SystemMessage, UserMessage

        async for message in client.receive_response():
            if isinstance(message, SystemMessage) and message.subtype == "init":
                self.session_id = message.data.get("session_id")
                self._check_server(message.data.get("mcp_servers") or [])
            elif isinstance(message, AssistantMessage):
                self._add_assistant(message)
            elif isinstance(message, UserMessage):
                self._add_builtin_results(message)
            elif isinstance(message, ResultMessage):
                self.transcript.append({"role": "result", "subtype": message.subtype, "num_turns": message.num_turns,
                                        "result": message.result})
                return message
        raise CliError("Claude Code stopped without a result message")

    def _check_server(self, servers: list[dict[str, Any]]) -> None:
        status = {s.get("name"): s.get("status") for s in servers}
        if status.get(self.p.server_name) != "connected":
            raise CliError(f"the robot's MCP server is not connected in Claude Code (status: {status})")

    def _add_assistant(self, message: Any) -> None:
        from claude_agent_sdk import TextBlock, ThinkingBlock, ToolUseBlock

        # The CLI sends one AssistantMessage per content block; a model turn is one message id
        # (each carries that reply's usage so far: the latest wins).
        key = message.message_id or message.uuid or str(len(self.usage_by_message))
        self.usage_by_message[key] = _usage(message.usage or {})
        blocks: list[dict[str, Any]] = []
        for block in message.content:
            if isinstance(block, TextBlock):
                blocks.append({"type": "text", "text": block.text})
            elif isinstance(block, ToolUseBlock):
                blocks.append({"type": "tool_use", "id": block.id, "name": block.name, "input": block.input})
            elif isinstance(block, ThinkingBlock):
                blocks.append({"type": "thinking", "thinking": block.thinking})
        last = self.transcript[-1]
        if last.get("role") == "assistant" and last.get("id") == message.message_id:
            last["content"].extend(blocks)
        else:
            self.transcript.append({"role": "assistant", "id": message.message_id, "content": blocks})

    def _add_builtin_results(self, message: Any) -> None:
        from claude_agent_sdk import ToolResultBlock

        # Robot tool results are recorded by the bridge (with image paths); keep Read and the rest.
        if not isinstance(message.content, list):
            return
        for block in message.content:
            if isinstance(block, ToolResultBlock) and not _robot_result(block, self.transcript):
                content = block.content if isinstance(block.content, str) else _summarise(block.content)
                self.transcript.append({"role": "tool", "tool_use_id": block.tool_use_id, "content": content,
                                        "is_error": bool(block.is_error)})


async def _connect(client: Any) -> None:
    from claude_agent_sdk.types import CanUseToolShadowedWarning

    with warnings.catch_warnings():
        # "allowed robot tools skip can_use_tool": intended, the callback guards the other tools.
        warnings.simplefilter("ignore", CanUseToolShadowedWarning)
        await client.connect()


def _robot_result(block: Any, transcript: list[dict[str, Any]]) -> bool:
    for entry in reversed(transcript):
        if entry.get("role") == "assistant":
            return any(b.get("id") == block.tool_use_id and b.get("name", "").startswith("mcp__")
                       for b in entry["content"])
    return False


def _summarise(content: list[dict[str, Any]] | None) -> list[dict[str, Any]]:
    """Tool result blocks without inline image data (the transcript keeps paths, not pixels)."""
    out = []
    for block in content or []:
        if block.get("type") == "image":
            out.append({"type": "image", "omitted": "inline image"})
        else:
            out.append(block)
    return out


def _usage(usage: dict[str, Any]) -> TokenUsage:
    return TokenUsage(
        input_tokens=int(usage.get("input_tokens") or 0),
        output_tokens=int(usage.get("output_tokens") or 0),
        cache_creation_input_tokens=int(usage.get("cache_creation_input_tokens") or 0),
        cache_read_input_tokens=int(usage.get("cache_read_input_tokens") or 0),
    )
