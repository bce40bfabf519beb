"""`serve_dashboard` as the CLI runs it: a process that serves until Ctrl-C, then keeps the record."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from dashboard_support import REPO, TOY_RECIPE

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]

SERVE = """
import sys
sys.path.insert(0, {test_dir!r})
from dashboard_support import toy_args
from rpent.runner.logs import setup_console
from rpent.dashboard.cli import serve_dashboard
from rpent.robot import load_robot
module = load_robot("toy")
args = toy_args({output!r}, "--planner", "replay", "--recipe", {recipe!r}, "--speed", "0.01", "--dashboard", "--port", "0")
setup_console(quiet=True)
raise SystemExit(serve_dashboard(args, module.get_robot_spec(), module))
"""


def test_ctrl_c_aborts_the_running_task_keeps_its_record_and_exits_130(tmp_path: Path) -> None:
    output = tmp_path / "session"
    code = SERVE.format(test_dir=str(Path(__file__).parent), output=str(output), recipe=str(TOY_RECIPE))
    process = subprocess.Popen([sys.executable, "-c", code], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        line = process.stdout.readline()  # "rpent dashboard: http://127.0.0.1:PORT/"
        assert line.startswith("rpent dashboard: http://127.0.0.1:"), line + process.stderr.read()
        url = line.split(": ", 1)[1].strip()
        with httpx.Client(base_url=url, timeout=10) as client:
            assert client.post("/api/tasks", json={"fields": {}}).status_code == 201
            # Wait on the event stream for the slow first motion to be under way (its "moving" stage comes after
            # the frame of where it began, so the episode has a picture to keep).
            with client.stream("GET", "/api/events") as events:
                lines = events.iter_lines()
                for event_line in lines:
                    if event_line == "event: tool_stage" and '"move_to"' in next(lines):
                        break
        process.send_signal(signal.SIGINT)
        assert process.wait(60) == 130  # README: 130 means interrupted (Ctrl-C)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(10)
    result = json.loads((output / "task-001" / "result.json").read_text())
    assert result["status"] == "aborted" and result["finish_result"]["operator_aborted"] is True
    steps = [json.loads(line) for line in (output / "task-001" / "steps.jsonl").read_text().splitlines()]
    assert [s["tool"] for s in steps] == ["get_state", "move_to"] and steps[-1]["cancelled"] is True
    assert (output / "task-001" / "episode.mp4").is_file()
