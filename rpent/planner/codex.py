"""The `codex` planner: the Codex CLI (`codex exec --json`) driving the toolkit over MCP.

Every run gets its own CODEX_HOME with a config.toml written here (model provider, the robot's
MCP server, sandbox, features), so a developer's personal Codex config, plugins, hooks or MCP
servers never reach robot control. The toolkit is served from this process
(rpent.planner.cli_common.RunBridge); Codex views the saved PNGs with its own view_image tool.

Operator messages reach the model inside the next tool result; if Codex ends its turn first,
they are sent in a follow-up `codex exec resume <thread>` turn.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import queue
import shutil
import threading
from pathlib import Path
from typing import Any

from rpent.option_checks import check_integer, check_positive
from rpent.planner.base import AsyncPlanner, OperatorInput, PlannerResult, PlannerStatus, TokenUsage
from rpent.planner.cli_common import RunBridge, find_executable, terminate_group
from rpent.planner.cli_run import MODEL_ENDED, CliRun
from rpent.settings import CODEX_DEFAULT_MODEL, api_key_from
from rpent.tools.api import ToolkitAPI

log = logging.getLogger(__name__)

DEFAULT_MODEL = CODEX_DEFAULT_MODEL
#: How long a robot tool call waits for Codex's own announcement of it (the turn count then is exact).
ANNOUNCE_TIMEOUT_S = 2.0
# Codex features that have no place in robot control; the shell is added unless allow_shell.
_FEATURES_OFF = ("apps", "goals", "hooks", "image_generation", "plugins", "remote_plugin")
_SHELL_FEATURES = ("shell_tool", "unified_exec", "shell_snapshot")
# Event items that are the model's own output: the first one after tool results starts a model turn.
_MODEL_ITEMS = frozenset({"agent_message", "reasoning", "mcp_tool_call", "command_execution", "file_change",
                          "web_search", "todo_list"})


def find_codex(explicit: str | os.PathLike[str] | None = None) -> str | None:
    """`explicit`, else $RPENT_CODEX_BIN, else <repo>/node_modules/.bin/codex, else `codex` on PATH."""
    return find_executable(explicit, "RPENT_CODEX_BIN", "node_modules/.bin/codex", "codex")


class CodexPlanner(AsyncPlanner):
    """The Codex CLI as the planner.

    Options: `model`, `base_url` (an OpenAI Responses API endpoint; default: the public API),
    `api_key_env` (the variable holding the key; default OPENAI_API_KEY), `api_key`,
    `max_wall_time_s`, `codex_bin` (see find_codex), `server_name`, `inline_images` (MCP image
    blocks, which Codex hands the model as input_image), `allow_shell` (Codex's shell tools,
    sandboxed to the run's directories; off by default), `end_turn_nudges`, `reasoning_effort`,
    `extra_config` (more TOML lines for config.toml).
    """

    name = "codex"

    def __init__(
        self,
        *,
        model: str = DEFAULT_MODEL,
        base_url: str | None = None,
        api_key: str | None = None,
        api_key_env: str = "OPENAI_API_KEY",
        max_wall_time_s: float | None = None,
        codex_bin: str | os.PathLike[str] | None = None,
        server_name: str = "robot",
        inline_images: bool = True,
        allow_shell: bool = False,
        end_turn_nudges: int = 1,
        reasoning_effort: str | None = None,
        extra_config: str = "",
    ) -> None:
        if not isinstance(model, str) or not model:
            raise ValueError(f"model: must be a non-empty model name, got {model!r}")
        if not isinstance(server_name, str) or not server_name.replace("_", "").isalnum():
            raise ValueError(f"server_name: must be letters, digits or '_', got {server_name!r}")
        check_integer("end_turn_nudges", end_turn_nudges, 0)
        if not isinstance(api_key_env, str) or not api_key_env.replace("_", "").isalnum():
            raise ValueError(f"api_key_env: must be an environment variable name, got {api_key_env!r}")
        check_positive("max_wall_time_s", max_wall_time_s)
        key = api_key_from(api_key, api_key_env)
        binary = find_codex(codex_bin)
        if codex_bin and not (Path(codex_bin).is_file() or shutil.which(str(codex_bin))):
            raise ValueError(f"codex_bin: {codex_bin} is not an executable file")
        if binary is None:
            raise ValueError("codex_bin: no Codex CLI found (set RPENT_CODEX_BIN, run `npm ci` in the repository "
                             "for node_modules/.bin/codex, or put `codex` on PATH)")
        self.model = model
        self.base_url = base_url or "https://api.openai.com/v1"
        self._api_key = key
        self.api_key_env = api_key_env
        self.max_wall_time_s = max_wall_time_s
        self.codex_bin = binary
        self.server_name = server_name
        self.inline_images = inline_images
        self.allow_shell = allow_shell
        self.end_turn_nudges = end_turn_nudges
        self.reasoning_effort = reasoning_effort
        self.extra_config = extra_config
        self.transcript: list[dict[str, Any]] = []

    def config_toml(self, *, mcp_url: str, instructions_file: Path, writable_roots: list[Path]) -> str:
        """The whole config.toml of one run (nothing is inherited from ~/.codex)."""
        q = json.dumps  # a JSON string is a valid TOML basic string
        lines = [
            f"model = {q(self.model)}",
            'model_provider = "rpent"',
            f"model_instructions_file = {q(str(instructions_file))}",
            'approval_policy = "never"',
            'sandbox_mode = "workspace-write"',
            'web_search = "disabled"',
        ]
        if self.reasoning_effort:
            lines.append(f"model_reasoning_effort = {q(self.reasoning_effort)}")
        lines += [
            "",
            "[sandbox_workspace_write]",
            f"writable_roots = [{', '.join(q(str(r)) for r in writable_roots)}]",
            "network_access = false",
            "exclude_slash_tmp = true",  # by default /tmp and $TMPDIR are writable too
            "exclude_tmpdir_env_var = true",
            "",
            "[features]",
            *(f"{name} = false" for name in _FEATURES_OFF + (() if self.allow_shell else _SHELL_FEATURES)),
            "",
            "[skills]",
            "include_instructions = false",  # Codex's bundled coding skills mean nothing to a robot
            "",
            "[agents]",
            "enabled = false",  # no sub-agents
            "",
            "[model_providers.rpent]",
            'name = "rpent"',
            f"base_url = {q(self.base_url)}",
            'wire_api = "responses"',
            f"env_key = {q(self.api_key_env)}",
            "",
            f"[mcp_servers.{self.server_name}]",
            f"url = {q(mcp_url)}",
            "required = true",
            'default_tools_approval_mode = "approve"',
            "tool_timeout_sec = 86400",  # a robot motion takes as long as it takes; limits are ours
            "",
            self.extra_config,
        ]
        return "\n".join(lines) + "\n"

    async def _solve(self, system_prompt: str, user_message: str, toolkit: ToolkitAPI, max_turns: int,
                     input_queue: queue.Queue[OperatorInput] | None) -> PlannerResult:
        run = _Run(self, toolkit, system_prompt, max_turns)
        self.transcript = run.transcript

        async def body(bridge: RunBridge, scratch: Path) -> PlannerResult:
            run.write_home(scratch, bridge.url)
            return await run.run(user_message)

        return await run.serve(input_queue, "rpent-codex-", body)


class _Run(CliRun):
    """One solve() call: the codex processes and their event stream, on top of the shared run state."""

    label = "codex"
    p: CodexPlanner

    def __init__(self, planner: CodexPlanner, toolkit: ToolkitAPI, system_prompt: str, max_turns: int) -> None:
        super().__init__(planner, toolkit, system_prompt, max_turns)
        self.usage = TokenUsage()
        self.turns = 0
        self.thread_id: str | None = None
        self.home: Path | None = None
        self.workdir: Path | None = None
        # Codex announces each MCP call on its event stream before sending it; the bridge waits
        # for that announcement so the turn count is current when it decides to admit a call.
        self._announce = threading.Condition()
        self._announced = 0
        self._admitted = 0
        self._awaiting_model = True

    # -- set-up ---------------------------------------------------------------------------------
    def write_home(self, scratch: Path, mcp_url: str) -> None:
        self.home = scratch / "codex_home"
        self.home.mkdir()
        instructions = scratch / "instructions.md"
        instructions.write_text(self.system_prompt)
        self.workdir = self.roots[0] if self.roots else scratch / "work"
        self.workdir.mkdir(parents=True, exist_ok=True)
        config = self.p.config_toml(mcp_url=mcp_url, instructions_file=instructions,
                                    writable_roots=self.roots[1:])
        (self.home / "config.toml").write_text(config)

    def command(self, prompt: str) -> list[str]:
        assert self.workdir is not None
        head = [self.p.codex_bin, "exec", "--json", "--skip-git-repo-check", "-C", str(self.workdir)]
        if self.thread_id is None:
            return [*head, prompt]
        return [*head, "resume", self.thread_id, prompt]

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("CODEX_")}
        env.update(CODEX_HOME=str(self.home), **{self.p.api_key_env: self.p._api_key})
        return env

    # -- bridge hooks (server thread) -------------------------------------------------------------
    def admit(self, name: str, arguments: dict[str, Any]) -> str | None:
        with self._announce:
            self._admitted += 1
            if not self._announce.wait_for(lambda: self._announced >= self._admitted, ANNOUNCE_TIMEOUT_S):
                log.warning("Codex did not announce the %s call within %.1f s; admitting it on the current "
                            "turn count", name, ANNOUNCE_TIMEOUT_S)
            turns = self.turns
        if turns > self.max_turns:
            reason = f"max_turns ({self.max_turns}) reached without a finish"
            self.control.request_stop(PlannerStatus.TURN_LIMIT, reason)
            return reason
        return None

    # -- main loop --------------------------------------------------------------------------------
    async def run(self, user_message: str) -> PlannerResult:
        return await self.drive(self._converse(user_message), (OSError,), "the Codex CLI could not be started")

    async def wind_down(self) -> None:
        if self.home is not None:
            # turn.completed (the event stream's usage) never comes when we stop a turn early.
            self.usage = _usage_from_sessions(self.home) or self.usage

    async def _converse(self, message: str) -> tuple[PlannerStatus, str]:
        while True:
            self.transcript.append({"role": "user", "content": message})
            code, stderr = await self._exec(message)
            if self.toolkit.finish_result is not None:
                return PlannerStatus.FINISHED, "finish accepted"
            if self.turns > self.max_turns:
                return PlannerStatus.TURN_LIMIT, f"max_turns ({self.max_turns}) reached without a finish"
            if code != 0 or self.error is not None:
                self.error = self.error or stderr.strip()[-2000:] or f"codex exited with status {code}"
                return PlannerStatus.ERROR, f"codex exec failed (exit status {code})"
            follow_up = self.follow_up()
            if follow_up is None:
                return MODEL_ENDED
            message = follow_up
            if self.thread_id is None:
                return PlannerStatus.ERROR, "codex reported no thread id, so the session cannot be resumed"

    async def _exec(self, prompt: str) -> tuple[int, str]:
        """Run one `codex exec` turn to its end; killed (with its process group) if cancelled."""
        self._awaiting_model = True
        process = await asyncio.create_subprocess_exec(
            *self.command(prompt), stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE, env=self.env(), cwd=str(self.workdir), start_new_session=True,
            limit=64 * 1024 * 1024,  # one event line carries a whole tool result, images included
        )
        stderr_task = asyncio.ensure_future(process.stderr.read()) if process.stderr else None
        try:
            assert process.stdout is not None
            async for line in process.stdout:
                self._event(line)
            code = await process.wait()
            stderr = (await stderr_task).decode(errors="replace") if stderr_task else ""
            return code, stderr
        finally:
            if process.returncode is None:
                await terminate_group(process)
            if stderr_task is not None:
                stderr_task.cancel()

    # -- event stream -----------------------------------------------------------------------------
    def _event(self, line: bytes) -> None:
        try:
            event = json.loads(line)
        except ValueError:
            log.debug("codex: %s", line.decode(errors="replace").rstrip())
            return
        kind = event.get("type")
        if kind == "thread.started":
            self.thread_id = event.get("thread_id")
        elif kind == "turn.completed":
            self.usage.add(_usage(event.get("usage") or {}))
        elif kind == "turn.failed":
            self.error = str((event.get("error") or {}).get("message") or event)
            self.transcript.append({"role": "event", "type": "turn.failed", "error": self.error})
        elif kind == "error":  # also sent for retried stream errors: the exit status decides
            self.transcript.append({"role": "event", "type": "error", "error": str(event.get("message") or event)})
        elif kind in ("item.started", "item.completed"):
            self._item(kind, event.get("item") or {})

    def _item(self, kind: str, item: dict[str, Any]) -> None:
        item_type = item.get("type")
        if item_type in _MODEL_ITEMS and self._awaiting_model:
            with self._announce:
                self.turns += 1
                self._awaiting_model = False
            if self.turns > self.max_turns:
                self.control.request_stop(PlannerStatus.TURN_LIMIT,
                                          f"max_turns ({self.max_turns}) reached without a finish")
        if item_type == "mcp_tool_call":
            if kind == "item.started":
                if item.get("server") == self.p.server_name:
                    with self._announce:
                        self._announced += 1
                        self._announce.notify_all()
                self._add_assistant({"type": "tool_use", "id": item.get("id"), "name": item.get("tool"),
                                     "server": item.get("server"), "input": item.get("arguments")})
            else:
                self._awaiting_model = True  # its result goes back to the model
        elif kind == "item.completed":
            if item_type == "agent_message":
                self._add_assistant({"type": "text", "text": item.get("text", "")})
            elif item_type == "reasoning":
                self._add_assistant({"type": "thinking", "thinking": item.get("text", "")})
            elif item_type == "error":
                # e.g. "Model metadata for `...` not found": Codex carries on; keep it in the record.
                self.transcript.append({"role": "event", "type": "error", "message": item.get("message")})
            elif item_type in _MODEL_ITEMS:
                self._awaiting_model = True
                self.transcript.append({"role": "tool", "name": item_type, "item": item})

    def _add_assistant(self, block: dict[str, Any]) -> None:
        last = self.transcript[-1]
        if last.get("role") == "assistant" and last.get("turn") == self.turns:
            last["content"].append(block)
        else:
            self.transcript.append({"role": "assistant", "turn": self.turns, "content": [block]})


def _usage_from_sessions(home: Path) -> TokenUsage | None:
    """The thread's cumulative usage from Codex's session files (written after every model reply)."""
    best: dict[str, Any] | None = None
    for path in sorted((home / "sessions").rglob("*.jsonl")):
        try:
            lines = path.read_text(errors="replace").splitlines()
        except OSError:
            continue
        for line in lines:
            if '"token_count"' not in line:
                continue
            try:
                payload = json.loads(line).get("payload") or {}
                total = (payload.get("info") or {}).get("total_token_usage")
            except (ValueError, AttributeError):
                continue
            if isinstance(total, dict) and (best is None or total.get("total_tokens", 0) >= best.get("total_tokens", 0)):
                best = total
    return _usage(best) if best is not None else None


def _usage(usage: dict[str, Any]) -> TokenUsage:
    cached = int(usage.get("cached_input_tokens") or 0)
    return TokenUsage(
        input_tokens=max(0, int(usage.get("input_tokens") or 0) - cached),  # OpenAI counts cached input inside
        output_tokens=int(usage.get("output_tokens") or 0),
        cache_read_input_tokens=cached,
    )
