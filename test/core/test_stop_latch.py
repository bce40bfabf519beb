"""The latched stop in process: once triggered (the model's `stop` tool, or an operator's interface through
Toolkit.stop), the running motion is cancelled and every motion after it is refused with one line until an
operator releases it; read-only tools go on; a toolkit started again for the same robot comes up stopped."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time

from rpent.tools import Toolkit
from rpent.tools.stop_latch import robot_latch

from .toolkits import GATE_TOOLS, Gates

LINE = re.compile(r"^stopped by (.+) at \d{4}-\d\d-\d\d \d\d:\d\d:\d\d \((.*)\): an operator must release it$")


def latched_kit(tmp_path, gates: Gates, run: str = "run") -> Toolkit:
    latch = robot_latch("gates", tmp_path / "state")
    return Toolkit(robot=gates, tools=GATE_TOOLS, output_dir=tmp_path / run, stop_latch=latch)


def steps(run_dir) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "steps.jsonl").read_text().splitlines()]


def test_the_models_stop_cancels_the_running_motion_and_refuses_every_motion_until_released(tmp_path):
    gates = Gates()
    kit = latched_kit(tmp_path, gates)
    running = kit.submit("spin", {})
    assert gates.started_event("spin").wait(5)
    # An operator interface (not a tool: the model's call would wait behind the running motion).
    event = kit.stop("ros /toolkit/stop", "the cube fell off")
    assert event["cancelled_calls"] == 1
    result = running.result(timeout=5)
    assert result.is_error and LINE.match(result.error.removeprefix("cancelled: ")), result.error

    refused = kit.execute_tool("work", {"label": "after"})
    assert refused.is_error and LINE.match(refused.error).groups() == ("ros /toolkit/stop", "the cube fell off")
    assert "after" not in gates.started
    assert not kit.execute_tool("peek", {"label": "still reads"}).is_error  # read-only tools go on

    # The model's own stop, while latched: recorded, the first stop's who and why kept.
    again = kit.execute_tool("stop", {"reason": "the arm looks stuck"})
    assert not again.is_error and again.data["latched"] is True
    assert LINE.match(again.data["line"]).groups() == ("ros /toolkit/stop", "the cube fell off")

    assert kit.release_stop("operator at the dashboard")["stopped_by"] == "ros /toolkit/stop"
    assert not kit.execute_tool("work", {"label": "released"}).is_error
    assert "released" in gates.started
    kit.close(timeout=5)
    events = [json.loads(line) for line in (tmp_path / "run" / "stop_events.jsonl").read_text().splitlines()]
    assert [(e["event"], e["by"]) for e in events] == [
        ("stop", "ros /toolkit/stop"), ("stop", "the model"), ("release", "operator at the dashboard")]
    assert [s["tool"] for s in steps(tmp_path / "run")] == ["spin", "work", "peek", "stop", "work"]
    assert kit.stop_events() == events


def test_a_toolkit_started_again_for_the_robot_comes_up_stopped_and_records_it(tmp_path):
    gates = Gates()
    first = latched_kit(tmp_path, gates, "run1")
    assert not first.execute_tool("stop", {"reason": "smoke from the gripper"}).is_error
    first.close(timeout=5)  # as a toolkit node killed and started again by launch

    second = latched_kit(tmp_path, gates, "run2")
    refused = second.execute_tool("work", {"label": "x"})
    assert refused.is_error and LINE.match(refused.error).groups() == ("the model", "smoke from the gripper")
    assert json.loads((tmp_path / "run2" / "stop_latch.json").read_text())["latched"] is True
    second.release_stop("rpent stop --release")
    second.close(timeout=5)

    third = latched_kit(tmp_path, gates, "run3")
    assert not third.execute_tool("work", {"label": "y"}).is_error
    third.close(timeout=5)


def test_no_tool_releases_the_stop(tmp_path):
    kit = latched_kit(tmp_path, Gates())
    kit.stop("the dashboard", "test")
    assert not any("release" in t.name for t in kit.list_tools())
    assert kit.stop_latch.latched
    kit.close(timeout=5)


def test_a_latch_file_that_cannot_be_read_counts_as_latched(tmp_path):
    path = tmp_path / "state" / "gates" / "stop_latch.json"
    path.parent.mkdir(parents=True)
    path.write_text("{not json")
    kit = latched_kit(tmp_path, Gates())
    refused = kit.execute_tool("work", {"label": "x"})
    assert refused.is_error and "an unreadable latch file" in refused.error
    kit.close(timeout=5)


def rpent_stop(tmp_path, *args: str) -> str:
    """`rpent stop --robot gates ...` in a process of its own, on the test's state directory; its output."""
    env = {**os.environ, "RPENT_STATE_DIR": str(tmp_path / "state")}
    done = subprocess.run([sys.executable, "-m", "rpent", "stop", "--robot", "gates", *args], env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_rpent_stop_in_another_process_stops_the_running_motion_and_its_release_lets_motions_run(tmp_path):
    gates = Gates()
    kit = latched_kit(tmp_path, gates)
    running = kit.submit("spin", {})
    assert gates.started_event("spin").wait(5)
    assert "an operator must release it" in rpent_stop(tmp_path, "--reason", "the cable is caught")
    result = running.result(timeout=10)
    assert result.is_error and LINE.match(result.error.removeprefix("cancelled: ")).group(2) == "the cable is caught"
    assert LINE.match(kit.execute_tool("work", {"label": "x"}).error).group(2) == "the cable is caught"

    assert "released" in rpent_stop(tmp_path, "--release")
    deadline = time.monotonic() + 10
    while kit.stop_latch.latched:  # the toolkit follows the file (every 50 ms)
        assert time.monotonic() < deadline, "the release was not seen within 10 s"
        time.sleep(0.01)
    assert not kit.execute_tool("work", {"label": "y"}).is_error
    kit.close(timeout=5)
    events = kit.stop_events()
    assert [e["event"] for e in events] == ["stop", "release"]
    assert events[0]["by"].startswith("rpent stop (") and events[0]["cancelled_calls"] == 1


def test_the_models_stop_takes_hold_while_a_motion_runs_not_after_it(tmp_path):
    gates = Gates()
    kit = latched_kit(tmp_path, gates)
    running = kit.submit("spin", {})  # runs until cancelled: a stop waiting its turn would wait forever
    assert gates.started_event("spin").wait(5)
    stop = kit.submit("stop", {"reason": "parallel call"})
    result = running.result(timeout=10)
    assert result.is_error and LINE.match(result.error.removeprefix("cancelled: ")).groups() == ("the model",
                                                                                                "parallel call")
    assert stop.result(timeout=10).data["cancelled_calls"] == 1
    kit.close(timeout=5)
    assert [e["event"] for e in kit.stop_events()] == ["stop"]  # one stop, recorded once
