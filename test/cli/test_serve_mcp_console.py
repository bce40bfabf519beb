"""`rpent serve-mcp` tells its operator on the console when it refuses a client's call, and its record
keeps a run.log as `rpent run`'s does."""

from __future__ import annotations

import json
import subprocess
import sys

from .cli_support import REPO, rpent_env


def _request(proc: subprocess.Popen[str], message: dict) -> dict | None:
    proc.stdin.write(json.dumps(message) + "\n")
    proc.stdin.flush()
    if "id" not in message:
        return None
    for line in proc.stdout:  # bounded by communicate()'s timeout below if the server hangs
        reply = json.loads(line)
        if reply.get("id") == message["id"]:
            return reply
    raise AssertionError("the server closed stdout without answering")


def test_refused_calls_are_logged_on_the_console(tmp_path):
    proc = subprocess.Popen(
        [sys.executable, "-m", "rpent", "serve-mcp", "--robot", "toy", "--output-dir", str(tmp_path / "mcp")],
        cwd=REPO, env=rpent_env(), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        _request(proc, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "test", "version": "0"}}})
        _request(proc, {"jsonrpc": "2.0", "method": "notifications/initialized"})
        bad = _request(proc, {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                              "params": {"name": "move_to", "arguments": {"x_m": 5.0, "y_m": 0.1}}})
        unknown = _request(proc, {"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                                  "params": {"name": "fly", "arguments": {}}})
        assert bad["result"]["isError"] and unknown["result"]["isError"]
        _, stderr = proc.communicate(timeout=60)  # closing stdin ends a stdio server
    finally:
        proc.kill()
    refused = [line for line in stderr.splitlines() if "refused" in line]
    assert any("move_to" in line and "x_m" in line for line in refused), stderr
    assert any("'fly'" in line for line in refused), stderr
    run_log = (tmp_path / "mcp" / "run.log").read_text()  # the record keeps what the console showed
    assert "refused" in run_log and "'fly'" in run_log
