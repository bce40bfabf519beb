"""Ctrl-C and SIGTERM end a run or a dashboard session with the shell's codes (130, 143), and the
record says which one it was."""

from __future__ import annotations

import json
import signal
import subprocess
import urllib.request

import httpx
import pytest

from rpent.record.steps import read_steps

from .cli_support import Running

# The toy's observe tool records for up to 10 s: long enough to be interrupted mid-call.
LONG_CALL = json.dumps({"tool": "observe", "arguments": {"duration_s": 10.0}}) + "\n"


SIGNALS = [(signal.SIGINT, 130, "interrupted (Ctrl-C)"), (signal.SIGTERM, 143, "terminated (SIGTERM)")]
# Started from a terminal, or as a script's background job (`cmd &`: SIGINT inherited ignored).
STARTED = pytest.mark.parametrize("sigint_ignored", [False, True], ids=["from_a_terminal", "from_a_script"])


@STARTED
@pytest.mark.parametrize(("sig", "code", "reason"), SIGNALS)
def test_run_interrupted_mid_call_exits_with_the_signal_code_and_records_it(tmp_path, sig, code, reason,
                                                                            sigint_ignored):
    recipe = tmp_path / "long.jsonl"
    recipe.write_text(LONG_CALL)
    out = tmp_path / "run"
    run = Running("run", "--robot", "toy", "--planner", "replay", "--recipe", str(recipe), "--output-dir", str(out),
                  sigint_ignored=sigint_ignored)
    run.wait_for("planning with replay")
    assert run.signal_and_wait(sig) == code, run.output()
    result = json.loads((out / "result.json").read_text())
    assert result["status"] == "aborted" and result["stop_reason"] == reason
    assert reason in (out / "run.log").read_text()
    assert reason in run.output()
    # The cancelled call reads as cancelled, never as ok, on the console and in its step line.
    [line] = [line for line in run.output().splitlines() if " tool observe (" in line]
    assert line.endswith(f") cancelled: {reason}"), run.output()
    [step] = read_steps(out / "steps.jsonl")
    assert step["status"] == "cancelled" and step["cancelled"] is True and step["error"] == f"cancelled: {reason}"


def test_a_dashboard_task_cancelled_by_ctrl_c_reads_cancelled_on_the_console_and_in_its_record(tmp_path):
    recipe = tmp_path / "long.jsonl"
    recipe.write_text(LONG_CALL)
    session = tmp_path / "session"
    run = Running("run", "--robot", "toy", "--dashboard", "--port", "0", "--planner", "replay", "--recipe", str(recipe),
                  "--output-dir", str(session))
    url = run.wait_for("rpent dashboard: http://127.0.0.1:").split()[-1]
    with httpx.Client(base_url=url, timeout=30) as client:
        assert client.post("/api/tasks", json={"fields": {}}).status_code == 201
        with client.stream("GET", "/api/events") as events:  # wait (bounded by the timeout) for the call to run
            lines = events.iter_lines()
            for event_line in lines:
                if event_line == "event: tool_started" and '"observe"' in next(lines):
                    break
    assert run.signal_and_wait(signal.SIGINT) == 130, run.output()
    [line] = [line for line in run.output().splitlines() if " tool observe (" in line]
    assert ") cancelled: " in line and " error: " not in line and not line.endswith(" ok"), run.output()
    [step] = read_steps(session / "task-001" / "steps.jsonl")
    assert step["status"] == "cancelled" and step["cancelled"] is True and step["error"].startswith("cancelled: ")
    assert line.endswith(step["error"])  # the console and the record say the same


@STARTED
@pytest.mark.parametrize(("sig", "code", "reason"), SIGNALS)
def test_dashboard_ended_by_a_signal_exits_with_its_code(tmp_path, sig, code, reason, sigint_ignored):
    run = Running("run", "--robot", "toy", "--dashboard", "--port", "0", "--output-dir", str(tmp_path / "session"),
                  sigint_ignored=sigint_ignored)
    url = run.wait_for("rpent dashboard: http://127.0.0.1:").split()[-1]
    with urllib.request.urlopen(url, timeout=30) as page:  # serving, not just started
        assert page.status == 200
    assert run.signal_and_wait(sig) == code, run.output()
    assert reason in run.output()


@STARTED
@pytest.mark.parametrize(("sig", "code", "reason"), SIGNALS)
def test_serve_mcp_over_http_exits_with_the_signal_code_and_says_which_signal(tmp_path, sig, code, reason,
                                                                              sigint_ignored):
    run = Running("serve-mcp", "--robot", "toy", "--http", "--port", "0", "--output-dir", str(tmp_path / "mcp"),
                  sigint_ignored=sigint_ignored)
    run.wait_for("MCP server listening on http://127.0.0.1:")
    assert run.signal_and_wait(sig) == code, run.output()  # as rpent run and the dashboard
    assert f"{reason}: stopping the robot" in run.output()
    assert "MCP client gone" not in run.output()
    assert reason in (tmp_path / "mcp" / "run.log").read_text()


@STARTED
@pytest.mark.parametrize(("sig", "code", "reason"), SIGNALS)
def test_serve_mcp_over_stdio_exits_with_the_signal_code(tmp_path, sig, code, reason, sigint_ignored):
    run = Running("serve-mcp", "--robot", "toy", "--output-dir", str(tmp_path / "mcp"), stdin=subprocess.PIPE,
                  sigint_ignored=sigint_ignored)
    run.wait_for("serving MCP over stdio")
    assert run.signal_and_wait(sig) == code, run.output()
    assert f"{reason}: stopping the robot" in run.output() and "MCP client gone" not in run.output()


def test_serve_mcp_over_stdio_ends_with_0_when_the_client_leaves(tmp_path):
    run = Running("serve-mcp", "--robot", "toy", "--output-dir", str(tmp_path / "mcp"), stdin=subprocess.PIPE)
    run.wait_for("serving MCP over stdio")
    run.proc.stdin.close()  # the client closed the pipe: a normal end
    assert run.wait(60) == 0, run.output()
    assert "MCP client gone" in run.output()
