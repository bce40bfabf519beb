"""A cancelled tool call withdraws its approval request from the dashboard: it ends at once and a
late answer to the id the operator saw is refused (issue 12)."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

import pytest

from rpent.dashboard.interaction import OperatorInteraction, StaleRequest
from rpent.tools.context import CancelToken

pytestmark = pytest.mark.timeout(30)


class _Operator:
    """An OperatorInteraction whose requests are recorded as they are published."""

    def __init__(self) -> None:
        self.events: list[tuple[str, dict]] = []
        self.opened = threading.Event()
        self.interaction = OperatorInteraction(self._publish)

    def _publish(self, kind: str, payload: dict) -> None:
        self.events.append((kind, payload))
        if kind == "operator_request":
            self.opened.set()

    def closed(self) -> list[dict]:
        return [p for k, p in self.events if k == "operator_request_closed"]


def _in_thread(fn: Callable[[], object]) -> tuple[threading.Thread, list[object]]:
    out: list[object] = []
    thread = threading.Thread(target=lambda: out.append(fn()))
    thread.start()
    return thread, out


def test_cancel_while_waiting_denies_at_once_and_retires_the_id(caplog) -> None:
    operator, token = _Operator(), CancelToken()
    thread, out = _in_thread(
        lambda: operator.interaction.request("7", "move arm by [0, 0, -0.02]", 30.0, on_cancel=_hook(token))
    )
    assert operator.opened.wait(5)
    request_id = operator.interaction.pending()[0]["id"]
    cancelled_at = time.monotonic()
    token.set("cancelled by the planner")
    thread.join(5)
    print(f"cancel-during-approval latency: {1000 * (time.monotonic() - cancelled_at):.2f} ms")
    assert out == [False]  # returned long before the 30 s timeout
    assert operator.interaction.pending() == []
    closed = operator.closed()
    assert [c["id"] for c in closed] == [request_id] and closed[0]["outcome"] == "cancelled"
    with caplog.at_level(logging.WARNING, logger="rpent.dashboard.interaction"), pytest.raises(StaleRequest):
        operator.interaction.respond(request_id, approve=True)
    assert request_id in caplog.text  # the refused late answer is logged


def test_a_call_cancelled_before_it_asks_never_waits() -> None:
    operator, token = _Operator(), CancelToken()
    token.set()
    assert operator.interaction.request("8", "home", 30.0, on_cancel=_hook(token)) is False
    assert [c["outcome"] for c in operator.closed()] == ["cancelled"]


def test_an_answer_still_counts_and_the_cancel_hook_is_released() -> None:
    operator, token = _Operator(), CancelToken()
    thread, out = _in_thread(lambda: operator.interaction.request("9", "grasp", 30.0, on_cancel=_hook(token)))
    assert operator.opened.wait(5)
    assert operator.interaction.respond(operator.interaction.pending()[0]["id"], approve=True) == "approved"
    thread.join(5)
    assert out == [True]
    token.set()  # a cancel after the answer changes nothing that was published
    assert [c["outcome"] for c in operator.closed()] == ["approved"]


def _hook(token: CancelToken) -> Callable[[Callable[[], object]], Callable[[], None]]:
    """The `on_cancel` a ToolContext hands out, over a bare token."""

    def on_cancel(callback: Callable[[], object]) -> Callable[[], None]:
        token.add_callback(callback)
        return lambda: token.remove_callback(callback)

    return on_cancel
