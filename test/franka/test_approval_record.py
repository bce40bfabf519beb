"""Every motion approval leaves a trace: who answered, when, what, and how long the motion waited, in
run.log, on the call's steps.jsonl line and summed up in result.json; the dashboard's event stream
tells the page that a call waits for approval and until when."""

from __future__ import annotations

import getpass
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from robots.franka.runtime import FrankaRuntime
from robots.franka.safety import SafetyEnvelope
from robots.franka.toolkit import FrankaToolkit
from rpent.dashboard.interaction import OperatorInteraction
from rpent.record.steps import read_steps
from rpent.tools.events import RecordingEventSink

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]


class _Stderr:
    """What the run printed so far; `wait_for` reads on until `text` appears after the last match
    (the approval question ends without a newline, so lines cannot be waited for)."""

    def __init__(self, stream) -> None:
        self.stream = stream
        self.seen = ""
        self.position = 0

    def wait_for(self, text: str, deadline_s: float = 90.0) -> None:
        end = time.monotonic() + deadline_s
        while text not in self.seen[self.position:]:
            assert time.monotonic() < end, f"{text!r} never appeared:\n{self.seen}"
            chunk = os.read(self.stream.fileno(), 4096)
            assert chunk, f"the run ended before {text!r}:\n{self.seen}"
            self.seen += chunk.decode(errors="replace")
        self.position = self.seen.index(text, self.position) + len(text)


def test_approvals_on_the_terminal_are_in_run_log_steps_and_result(tmp_path):
    recipe = tmp_path / "two_moves.jsonl"
    recipe.write_text("".join(json.dumps({"tool": "move_by", "arguments": {"dz_m": dz}}) + "\n" for dz in (0.02, -0.02)))
    out = tmp_path / "run"
    proc = subprocess.Popen(
        [sys.executable, "-m", "rpent", "run", "--robot", "franka", "--sim", "--approve-motions", "--planner", "replay",
         "--recipe", str(recipe), "--output-dir", str(out), "--memory-dir", str(tmp_path / "memory")],
        cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        env={**os.environ, "MUJOCO_GL": "egl", "PYTHONUNBUFFERED": "1"},
    )
    console = _Stderr(proc.stderr)
    try:
        for answer in (b"y\n", b"n\n"):
            console.wait_for("approve? [y/N]")
            proc.stdin.write(answer)
            proc.stdin.flush()
        console.wait_for("task ended")
        assert proc.wait(60) == 1
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    user = getpass.getuser()
    assert f"approval of call 1 (move_by): approved by terminal ({user}) after" in console.seen
    run_log = (out / "run.log").read_text()
    assert f"approval of call 1 (move_by): approved by terminal ({user}) after" in run_log
    assert f"approval of call 2 (move_by): denied by terminal ({user}) after" in run_log
    first, second = read_steps(out / "steps.jsonl")
    [yes] = first["approvals"]
    [no] = second["approvals"]
    assert (yes["outcome"], yes["by"], no["outcome"], no["by"]) == ("approved", f"terminal ({user})", "denied", f"terminal ({user})")
    assert yes["motion"].startswith("move arm by [0.0, 0.0, 0.02]")
    # Answered as soon as asked: on a quiet machine the round trip through the pipes is under the record's
    # millisecond, so the wait may be 0.0 (the CI's last run).
    assert 0 <= yes["waited_s"] < 90 and yes["answered_at"] - yes["requested_at"] == pytest.approx(yes["waited_s"], abs=0.01)
    assert yes["timeout_s"] == 30.0
    assert first["status"] == "ok" and second["status"] == "error" and "operator denied" in second["error"]
    summary = json.loads((out / "result.json").read_text())["approvals"]
    assert summary["asked"] == 2 and summary["approved"] == 1 and summary["denied"] == 1
    assert summary["timed_out"] == summary["cancelled"] == 0 and summary["by"] == [f"terminal ({user})"]
    assert summary["waited_s_total"] == pytest.approx(yes["waited_s"] + no["waited_s"], abs=0.01)


def test_a_dashboard_approval_is_recorded_and_the_page_is_told_the_call_waits_and_until_when(
    sim_runtime: FrankaRuntime, tmp_path: Path
) -> None:
    events = RecordingEventSink()
    opened = threading.Event()

    def publish(kind: str, payload: dict) -> None:
        events.publish(kind, payload)
        if kind == "operator_request":
            opened.set()

    interaction = OperatorInteraction(publish)
    arm = sim_runtime.arm()
    original = arm.envelope
    arm.envelope = SafetyEnvelope(original.limits.model_copy(update={"require_approval": True, "approval_timeout_s": 20.0}),
                                  arm.name)
    sim_runtime.approval = interaction
    kit = FrankaToolkit(robot=sim_runtime, output_dir=tmp_path, dashboard_events=events)
    try:
        call = kit.submit("move_by", {"dz_m": 0.01})
        assert opened.wait(10)
        [request] = interaction.pending()
        assert request["deadline"] == pytest.approx(request["created"] + 20.0)
        assert request["details"]["robot_request_id"] == str(call.id)
        stages = [p for kind, p in events.events if kind == "tool_stage"]
        assert [(p["call_id"], p["stage"]) for p in stages] == [(call.id, "awaiting_approval")]
        interaction.respond(request["id"], approve=True)
        assert call.result(60).error is None
    finally:
        kit.close(timeout=30)
        arm.envelope = original
        sim_runtime.approval = None
    [step] = read_steps(tmp_path / "steps.jsonl")
    [entry] = step["approvals"]
    assert entry["outcome"] == "approved" and entry["by"] == "dashboard" and entry["call_id"] == call.id
    [finished] = [p for kind, p in events.events if kind == "tool_finished"]
    assert finished["approvals"] == [entry]
    assert kit.approvals() == [entry]
