"""Cancellation: queued calls are dropped, running calls stop at safe boundaries, cleanup is awaited."""

from __future__ import annotations

import threading

import pytest

from rpent.tools import Toolkit

from .toolkits import GATE_TOOLS, Gates, ObservingToolkit

NOT_WITHIN = 0.2


@pytest.fixture
def gates() -> Gates:
    return Gates()


def test_cancel_of_a_queued_call_drops_it(gates):
    kit = Toolkit(robot=gates, tools=GATE_TOOLS)
    running = kit.submit("work", {"label": "e1", "block": True})
    assert gates.started_event("e1").wait(5)
    queued = kit.submit("work", {"label": "e2"})
    assert queued.cancel("not needed")
    result = queued.result(timeout=5)
    assert result.is_error and "cancelled before it started: not needed" in result.error
    gates.release("e1")
    assert not running.result(timeout=5).is_error
    kit.close(timeout=5)
    assert "e2" not in gates.started


def test_cancel_of_a_running_call_stops_it_at_a_safe_boundary(gates):
    kit = ObservingToolkit(robot=gates)
    call = kit.submit("spin", {})
    assert gates.started_event("spin").wait(5)
    assert call.cancel("operator said stop")
    result = call.result(timeout=5)
    assert result.is_error and "cancelled: operator said stop" in result.error
    # The robot is still observed after a cancelled motion.
    assert result.data["observed_after"] == "spin"
    kit.close(timeout=5)


def test_cancel_affects_only_that_call(gates):
    kit = Toolkit(robot=gates, tools=GATE_TOOLS)
    first = kit.submit("peek", {"label": "r1", "block": True})
    second = kit.submit("peek", {"label": "r2", "block": True})
    assert gates.started_event("r1").wait(5) and gates.started_event("r2").wait(5)
    first.cancel()
    assert first.result(timeout=5).is_error
    assert not second.done()
    gates.release("r2")
    assert not second.result(timeout=5).is_error
    kit.close(timeout=5)


def test_on_cancel_callback_runs_in_the_cancelling_thread_at_once():
    from typing import Any

    from rpent.tools import ToolContext, tool

    seen: dict[str, Any] = {}
    ready = threading.Event()

    @tool
    def hold(*, ctx: ToolContext[Any]) -> dict[str, Any]:
        """Hold until cancelled."""
        ctx.on_cancel(lambda: seen.setdefault("thread", threading.current_thread().name))
        ready.set()
        ctx.wait_cancelled(10)
        ctx.check_cancelled()
        return {}

    kit = Toolkit(tools=[hold])
    call = kit.submit("hold", {})
    assert ready.wait(5)
    threading.Thread(target=call.cancel, name="canceller").start()
    assert call.result(timeout=5).is_error
    assert seen["thread"] == "canceller"
    kit.close()


def test_toolkit_cancel_by_id(gates):
    kit = Toolkit(robot=gates, tools=GATE_TOOLS)
    call = kit.submit("spin", {})
    assert gates.started_event("spin").wait(5)
    assert kit.cancel(call.id)
    assert call.result(timeout=5).is_error
    assert not kit.cancel(call.id)  # already done
    assert not kit.cancel(9999)
    kit.close()


def test_cancel_active_and_wait_cancels_everything_and_pauses_admission(gates):
    kit = Toolkit(robot=gates, tools=GATE_TOOLS)
    active = kit.submit("spin", {})
    assert gates.started_event("spin").wait(5)
    queued = kit.submit("work", {"label": "e2"})
    assert kit.cancel_active_and_wait(timeout=5)
    assert active.done() and "cancelled" in active.result(0).error
    assert "cancelled before it started" in queued.result(0).error
    refused = kit.execute_tool("work", {"label": "during pause"})
    assert refused.is_error and "paused" in refused.error
    kit.resume_calls()
    assert kit.execute_tool("work", {"label": "after"}).data == {"label": "after"}
    assert gates.started == ["spin", "after"]
    kit.close()


def test_cancelled_call_counts_as_active_until_its_cleanup_ends(gates):
    kit = ObservingToolkit(robot=gates)
    kit.capture_gate = threading.Event()
    call = kit.submit("spin", {})
    assert gates.started_event("spin").wait(5)
    waiter_done = threading.Event()

    def cancel_all() -> None:
        kit.cancel_active_and_wait(timeout=10)
        waiter_done.set()

    threading.Thread(target=cancel_all).start()
    # The handler has stopped but its observation capture is still blocked.
    assert not waiter_done.wait(NOT_WITHIN)
    kit.capture_gate.set()
    assert waiter_done.wait(5)
    assert call.done()
    kit.close()
