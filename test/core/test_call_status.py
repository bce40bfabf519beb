"""How a call ended reads the same everywhere (steps.jsonl, the progress line, the dashboard's events):
ok, failed (it ran, but an outcome field it declares came back false), cancelled, or error."""

from __future__ import annotations

import json
import logging
import threading
from typing import Any

import pytest

from rpent.record.steps import read_steps
from rpent.runner.logs import FanOutSink, ProgressSink
from rpent.tools import Command, ToolContext, Toolkit, ToolResult, tool
from rpent.tools.events import RecordingEventSink
from rpent.tools.tool import ToolDefinitionError


@tool(outcome=["grasped"])
def close_fingers(holds: bool = True, *, ctx: ToolContext[Any]) -> dict[str, Any]:
    """Close the fingers; reports whether something is held.

    Args:
        holds: What the simulated gripper reports.
    """
    return {"arm": "arm", "grasped": holds}


@tool(outcome=["reached"])
def home_all(*, ctx: ToolContext[Any]) -> dict[str, Any]:
    """Home every arm; one entry per arm."""
    return {"arms": [{"arm": "left", "reached": True}, {"arm": "right", "reached": False}]}


@tool
def open_fingers(*, ctx: ToolContext[Any]) -> dict[str, Any]:
    """Open the fingers (grasped false is what an open gripper reports, not a failure)."""
    return {"grasped": False}


class SlowObservation(Toolkit):
    """Its observation after each call waits until the test lets it finish."""

    tools = [close_fingers, home_all, open_fingers]

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.observing = threading.Event()
        self.finish_observing = threading.Event()
        self.finish_observing.set()

    def _capture_observation(self, *, command: Command, result: ToolResult, elapsed_s: float):
        self.observing.set()
        assert self.finish_observing.wait(10)
        return {"action": command.name, "action_result": result.data, "arms": {"grasped": False}}, []


@pytest.fixture
def progress(caplog):
    caplog.set_level(logging.INFO, logger="test.progress")
    return ProgressSink(logging.getLogger("test.progress"))


def _lines(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "test.progress"]


def test_a_grasp_that_closed_on_nothing_reads_failed_not_ok(tmp_path, caplog, progress):
    events = RecordingEventSink()
    kit = SlowObservation(output_dir=tmp_path, dashboard_events=FanOutSink(progress, events))
    result = kit.execute_tool("close_fingers", {"holds": False})
    assert result.error is None and result.outcome == {"grasped": False} and result.unmet == ["grasped"]
    kit.execute_tool("close_fingers", {"holds": True})
    kit.execute_tool("open_fingers", {})  # the observation's own "grasped" is not the tool's outcome
    kit.close()
    steps = read_steps(tmp_path / "steps.jsonl")
    assert [(s["status"], s["outcome"]) for s in steps] == [
        ("failed", {"grasped": False}), ("ok", {"grasped": True}), ("ok", {})]
    lines = _lines(caplog)
    assert lines[0].startswith("tool close_fingers (") and lines[0].endswith(") failed: grasped=false"), lines
    assert lines[1].endswith(") ok") and lines[2].endswith(") ok"), lines
    assert caplog.records[0].levelno == logging.WARNING
    finished = [p for kind, p in events.events if kind == "tool_finished"]
    assert [(p["status"], p["status_text"]) for p in finished] == [
        ("failed", "failed: grasped=false"), ("ok", "ok"), ("ok", "ok")]


def test_an_outcome_false_for_any_arm_is_false_for_the_call(tmp_path):
    kit = SlowObservation(output_dir=tmp_path)
    assert kit.execute_tool("home_all", {}).outcome == {"reached": False}
    kit.close()
    assert read_steps(tmp_path / "steps.jsonl")[0]["status"] == "failed"


def test_a_call_cancelled_during_its_observation_reads_cancelled_everywhere(tmp_path, caplog, progress):
    kit = SlowObservation(output_dir=tmp_path, dashboard_events=progress)
    kit.finish_observing.clear()
    call = kit.submit("close_fingers", {})
    assert kit.observing.wait(10)  # the handler returned; the observation runs
    call.cancel("interrupted (Ctrl-C)")
    kit.finish_observing.set()
    result = call.result(10)
    kit.close()
    assert result.error.startswith("cancelled: interrupted (Ctrl-C)"), result.error
    assert result.data["action_result"] == {"arm": "arm", "grasped": True}  # where it ended is kept
    [step] = read_steps(tmp_path / "steps.jsonl")
    assert step["cancelled"] is True and step["status"] == "cancelled" and step["error"] == result.error
    assert json.loads(step["result"])["error"] == result.error  # the model reads it too
    [line] = _lines(caplog)
    assert ") cancelled: interrupted (Ctrl-C)" in line and " ok" not in line, line
    assert not kit.recipe()  # a cancelled call is no recipe step


def test_a_queued_call_cancelled_before_it_started_is_cancelled_in_its_step_line(tmp_path):
    kit = SlowObservation(output_dir=tmp_path)
    kit.finish_observing.clear()
    first = kit.submit("close_fingers", {})
    assert kit.observing.wait(10)
    queued = kit.submit("open_fingers", {})
    queued.cancel("not needed")
    kit.finish_observing.set()
    first.result(10)
    kit.close()
    steps = {s["tool"]: s for s in read_steps(tmp_path / "steps.jsonl")}
    assert steps["open_fingers"]["status"] == "cancelled" and steps["open_fingers"]["cancelled"] is True
    assert steps["close_fingers"]["status"] == "ok" and steps["close_fingers"]["cancelled"] is False


def test_a_refused_call_reaches_the_dashboard_timeline_and_the_console_once(tmp_path, caplog, progress):
    """A call refused before it ran (bad input here; a latched stop, a closed toolkit) is in the dashboard's
    timeline with its one line, as in steps.jsonl: an operator sees why the planner tries again."""
    from rpent.dashboard.state import DashboardState

    events = RecordingEventSink()
    kit = SlowObservation(output_dir=tmp_path, dashboard_events=FanOutSink(progress, events))
    result = kit.execute_tool("close_fingers", {"holds": "maybe"})
    kit.execute_tool("open_fingers", {})
    kit.close()
    assert result.error is not None and "holds" in result.error
    [step, _] = read_steps(tmp_path / "steps.jsonl")
    assert step["status"] == "error" and step["error"] == result.error
    assert [k for k, _ in events.events if k.startswith("tool_")] == ["tool_finished", "tool_started", "tool_finished"]
    refused = next(p for k, p in events.events if k == "tool_finished")
    assert refused["refused"] is True and refused["arguments"] == {"holds": "maybe"}
    assert refused["status_text"] == f"error: {result.error}"
    state = DashboardState("toy", [])
    state.apply("task_started", {"task_id": "t1"})
    for kind, payload in events.events:
        state.apply(kind, {**payload, "task_id": "t1"})
    assert [(r["tool"], r["status"], r["error"]) for r in state.task["timeline"]] == [
        ("close_fingers", "error", result.error), ("open_fingers", "ok", None)]
    # The console said it once, as the refusal's warning; the progress line is for calls that ran.
    assert [line for line in _lines(caplog) if "close_fingers" in line] == []
    assert [r.getMessage() for r in caplog.records if "close_fingers" in r.getMessage()] == [
        f"call 1 (close_fingers) refused: {result.error}"]


def test_a_recorded_recipe_expects_what_the_recorded_call_reported(tmp_path):
    kit = SlowObservation(output_dir=tmp_path)
    kit.execute_tool("close_fingers", {"holds": False})
    kit.execute_tool("close_fingers", {"holds": True})
    lines = [json.loads(line) for line in kit.write_recipe("t").read_text().splitlines()]
    kit.close()
    assert lines == [{"tool": "close_fingers", "arguments": {"holds": False}, "expect": {"grasped": False}},
                     {"tool": "close_fingers", "arguments": {"holds": True}}]


def test_outcome_must_name_result_fields():
    with pytest.raises(ToolDefinitionError, match="outcome must be a list of result field names"):
        tool(outcome="grasped")(close_fingers.fn)
