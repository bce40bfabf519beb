"""The scripted model server also satisfies the real agent CLIs, with a tool round trip through MCP.

Claude Code is the CLI bundled in the claude-agent-sdk wheel. Codex runs only where a Codex CLI is
installed (set RPENT_CODEX_BIN, e.g. after `npm install @openai/codex@0.171.0` in a scratch dir).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from fakes import FakeModelServer, Reply, Text, ToolUse

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]

MCP_SERVER = '''
import json, sys
from mcp.server.mcpserver import MCPServer

server = MCPServer("robot")
LOG = sys.argv[1]

@server.tool()
def move_by(dx_m: float) -> str:
    """Move the toy arm along x by dx_m metres."""
    with open(LOG, "a") as log:
        log.write(json.dumps({"tool": "move_by", "dx_m": dx_m}) + "\\n")
    return json.dumps({"x_m": dx_m})

server.run("stdio")
'''


def _claude_cli() -> str | None:
    try:
        import claude_agent_sdk
    except ImportError:
        return None
    path = Path(claude_agent_sdk.__file__).parent / "_bundled" / "claude"
    return str(path) if path.is_file() else None


@pytest.fixture
def mcp_server(tmp_path: Path) -> tuple[list[str], Path]:
    script = tmp_path / "robot_mcp.py"
    script.write_text(MCP_SERVER)
    calls = tmp_path / "calls.jsonl"
    return [sys.executable, str(script), str(calls)], calls


def _last_user_content(body: dict[str, Any]) -> list[Any]:
    content = body["messages"][-1]["content"]
    return content if isinstance(content, list) else []


@pytest.mark.skipif(_claude_cli() is None, reason="claude-agent-sdk with its bundled Claude Code CLI is not installed")
def test_claude_code_cli_calls_an_mcp_tool_through_the_fake(model_server: FakeModelServer, tmp_path: Path,
                                                            mcp_server: tuple[list[str], Path]) -> None:
    command, calls = mcp_server

    def turn(body: dict[str, Any]) -> Reply:
        results = [b for b in _last_user_content(body) if isinstance(b, dict) and b.get("type") == "tool_result"]
        if results:
            assert results[0]["tool_use_id"] == "toolu_move" and "0.05" in json.dumps(results[0]["content"])
            return Reply([Text("Moved.")])
        assert "mcp__robot__move_by" in [t["name"] for t in body["tools"]]
        return Reply([ToolUse("mcp__robot__move_by", {"dx_m": 0.05}, id="toolu_move")])

    model_server.script(turn, turn)
    config = tmp_path / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {"robot": {"type": "stdio", "command": command[0],
                                                           "args": command[1:]}}}))
    home = tmp_path / "home"
    home.mkdir()
    env = dict(os.environ, HOME=str(home), ANTHROPIC_BASE_URL=model_server.base_url, ANTHROPIC_API_KEY="test-key",
               CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1", DISABLE_TELEMETRY="1",
               MCP_CONNECTION_NONBLOCKING="0", ENABLE_TOOL_SEARCH="false")
    proc = subprocess.run(
        [_claude_cli(), "-p", "Move the arm 5 cm along x.", "--output-format", "stream-json", "--verbose",
         "--mcp-config", str(config), "--strict-mcp-config", "--allowedTools", "mcp__robot__move_by",
         "--tools", "", "--system-prompt", "You drive a toy arm.", "--model", "claude-sonnet-4-5"],
        env=env, cwd=tmp_path, capture_output=True, text=True, timeout=150, stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert [json.loads(line) for line in calls.read_text().splitlines()] == [{"tool": "move_by", "dx_m": 0.05}]
    final = json.loads(proc.stdout.strip().splitlines()[-1])
    assert final["type"] == "result" and final["result"] == "Moved."
    assert all(r.query == "beta=true" and r.body["stream"] is True for r in model_server.model_requests)


_REPO_CODEX = Path(__file__).resolve().parents[2] / "node_modules" / ".bin" / "codex"
_CODEX = os.environ.get("RPENT_CODEX_BIN") or (str(_REPO_CODEX) if _REPO_CODEX.exists() else shutil.which("codex"))


@pytest.mark.skipif(not _CODEX, reason="no Codex CLI: run scripts/setup.sh (npm ci), set RPENT_CODEX_BIN, or put `codex` on PATH")
def test_codex_cli_calls_an_mcp_tool_by_namespace_through_the_fake(model_server: FakeModelServer, tmp_path: Path,
                                                                   mcp_server: tuple[list[str], Path]) -> None:
    command, calls = mcp_server

    def turn(body: dict[str, Any]) -> Reply:
        outputs = [i for i in body["input"] if i.get("type") == "function_call_output"]
        if outputs:
            assert outputs[0]["call_id"] == "call_move" and "0.05" in json.dumps(outputs[0]["output"])
            return Reply([Text("Moved.")])
        return Reply([ToolUse("move_by", {"dx_m": 0.05}, id="call_move", namespace="mcp__robot")])

    model_server.script(turn, turn)
    home = tmp_path / "codex_home"
    home.mkdir()
    (home / "config.toml").write_text(f'''
model = "gpt-fake"
model_provider = "fake"

[model_providers.fake]
name = "fake"
base_url = "{model_server.base_url}/v1"
wire_api = "responses"
env_key = "FAKE_OPENAI_KEY"

[mcp_servers.robot]
command = {json.dumps(command[0])}
args = {json.dumps(command[1:])}
required = true
default_tools_approval_mode = "approve"
''')
    codex = _CODEX
    proc = subprocess.run(
        [codex, "exec", "--json", "--skip-git-repo-check", "Move the arm 5 cm along x."],
        env=dict(os.environ, CODEX_HOME=str(home), FAKE_OPENAI_KEY="test-key"), cwd=tmp_path,
        capture_output=True, text=True, timeout=150, stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert [json.loads(line) for line in calls.read_text().splitlines()] == [{"tool": "move_by", "dx_m": 0.05}]
    events = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    assert {"type": "agent_message", "text": "Moved."} in [
        {k: e["item"].get(k) for k in ("type", "text")} for e in events if e.get("type") == "item.completed"]
