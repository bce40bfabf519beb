"""Scheduling: exclusive by default, read-only together, queued exclusive calls first and in order."""

from __future__ import annotations

import threading

import pytest

from rpent.tools import Toolkit

from .toolkits import GATE_TOOLS, Gates

# How long a test waits to be sure something did NOT happen: a bound, not a race fix.
NOT_WITHIN = 0.2


@pytest.fixture
def gates() -> Gates:
    return Gates()


@pytest.fixture
def toolkit(gates: Gates):
    kit = Toolkit(robot=gates, tools=GATE_TOOLS)
    yield kit
    for event in list(gates.release_events.values()):
        event.set()
    kit.close(timeout=5)


def test_readonly_calls_run_together(toolkit, gates):
    gates.barrier = threading.Barrier(2)
    first = toolkit.submit("peek", {"label": "r1", "meet": True})
    second = toolkit.submit("peek", {"label": "r2", "meet": True})
    # Each call waits at a two-party barrier: both succeed only if they overlapped.
    assert not first.result(timeout=5).is_error
    assert not second.result(timeout=5).is_error


def test_exclusive_call_waits_for_the_running_one(toolkit, gates):
    first = toolkit.submit("work", {"label": "e1", "block": True})
    assert gates.started_event("e1").wait(5)
    second = toolkit.submit("work", {"label": "e2"})
    assert not gates.started_event("e2").wait(NOT_WITHIN)
    assert second.stage == "queued"
    gates.release("e1")
    assert first.result(timeout=5).data == {"label": "e1"}
    assert second.result(timeout=5).data == {"label": "e2"}


def test_readonly_call_waits_for_a_running_exclusive_call(toolkit, gates):
    toolkit.submit("work", {"label": "e1", "block": True})
    assert gates.started_event("e1").wait(5)
    reader = toolkit.submit("peek", {"label": "r1"})
    assert not gates.started_event("r1").wait(NOT_WITHIN)
    gates.release("e1")
    assert not reader.result(timeout=5).is_error


def test_pending_exclusive_call_runs_before_later_readonly_call(toolkit, gates):
    toolkit.submit("peek", {"label": "r1", "block": True})
    assert gates.started_event("r1").wait(5)
    writer = toolkit.submit("work", {"label": "e1"})
    later_reader = toolkit.submit("peek", {"label": "r2"})
    # r2 could share with r1, but the queued exclusive call e1 has priority over it.
    assert not gates.started_event("r2").wait(NOT_WITHIN)
    gates.release("r1")
    writer.result(timeout=5)
    later_reader.result(timeout=5)
    assert gates.started == ["r1", "e1", "r2"]


def test_readonly_calls_queued_before_an_exclusive_call_run_before_it(toolkit, gates):
    toolkit.submit("work", {"label": "e0", "block": True})
    assert gates.started_event("e0").wait(5)
    calls = [
        toolkit.submit("peek", {"label": "r1"}),
        toolkit.submit("peek", {"label": "r2"}),
        toolkit.submit("work", {"label": "e1"}),
    ]
    gates.release("e0")
    for call in calls:
        call.result(timeout=5)
    assert gates.started[0] == "e0"
    assert sorted(gates.started[1:3]) == ["r1", "r2"]
    assert gates.started[3] == "e1"


def test_exclusive_calls_keep_their_queue_order(toolkit, gates):
    toolkit.submit("work", {"label": "e0", "block": True})
    assert gates.started_event("e0").wait(5)
    calls = [toolkit.submit("work", {"label": f"e{i}"}) for i in range(1, 8)]
    gates.release("e0")
    for call in calls:
        call.result(timeout=5)
    assert gates.started == [f"e{i}" for i in range(8)]


def test_execute_tool_from_many_threads_is_safe(toolkit, gates):
    results = []
    lock = threading.Lock()

    def worker(n: int) -> None:
        for i in range(25):
            name = "work" if i % 3 else "peek"
            result = toolkit.execute_tool(name, {"label": f"{n}-{i}"})
            with lock:
                results.append(result)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert len(results) == 200
    assert not any(r.is_error for r in results)
    assert len(gates.started) == 200


def test_unknown_tool_returns_an_error_result(toolkit):
    result = toolkit.execute_tool("teleport", {})
    assert result.is_error and "unknown tool 'teleport'" in result.error


def test_invalid_arguments_return_an_error_before_the_handler_runs(toolkit, gates):
    result = toolkit.execute_tool("work", {"label": "x", "speed": 3})
    assert result.is_error and "speed: unknown argument" in result.error
    assert gates.started == []


def test_arguments_may_arrive_as_json_text(toolkit):
    assert toolkit.execute_tool("work", '{"label": "j"}').data == {"label": "j"}
    assert "not valid JSON" in toolkit.execute_tool("work", "{label").error


def test_closed_toolkit_returns_an_error_result(gates):
    kit = Toolkit(robot=gates, tools=GATE_TOOLS)
    kit.close()
    result = kit.execute_tool("work", {"label": "late"})
    assert result.is_error and "closed" in result.error
    assert gates.started == []


def test_close_lets_queued_calls_finish(gates):
    kit = Toolkit(robot=gates, tools=GATE_TOOLS)
    kit.submit("work", {"label": "e1", "block": True})
    assert gates.started_event("e1").wait(5)
    queued = kit.submit("work", {"label": "e2"})
    closer = threading.Thread(target=kit.close)
    closer.start()
    gates.release("e1")
    closer.join(5)
    assert not closer.is_alive()
    assert queued.result(timeout=0).data == {"label": "e2"}


def test_list_tools_can_drop_read_image(toolkit):
    names = [t.name for t in toolkit.list_tools()]
    assert names[:6] == ["work", "peek", "fail", "spin", "paint", "finish"]
    assert {"read_text_file", "write_text_file", "list_dir", "read_image"} <= set(names)
    assert "read_image" not in [t.name for t in toolkit.list_tools(include_read_image=False)]


def test_duplicate_tool_names_are_refused(gates):
    from .toolkits import work

    with pytest.raises(ValueError, match="two tools are named 'work'"):
        Toolkit(robot=gates, tools=[work, work])
