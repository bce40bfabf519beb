"""The CLI approval channel answers from a line typed after the question, denies on silence, and
stops waiting when the call is cancelled.

Terminals are a pipe (stdin redirected) and a pty (os.openpty: a real terminal line discipline).
"""

from __future__ import annotations

import io
import os
import threading
import time
from collections.abc import Callable, Iterator

import pytest

from robots.franka.approval import CliApprovalChannel
from rpent.runtime.arm import ApprovalChannel
from rpent.tools.context import CancelToken

pytestmark = pytest.mark.timeout(20)


class _Screen(io.StringIO):
    """The channel's output; `asked` is set once the question has been flushed to the operator."""

    def __init__(self) -> None:
        super().__init__()
        self.asked = threading.Event()

    def flush(self) -> None:
        super().flush()
        if "approve?" in self.getvalue():
            self.asked.set()


class _Terminal:
    """Operator side of a terminal: `type` writes keystrokes; `stream` is what the channel reads."""

    def __init__(self, read_fd: int, write_fd: int) -> None:
        self.stream = os.fdopen(read_fd, "r")
        self._write_fd = write_fd

    def type(self, text: str) -> None:
        os.write(self._write_fd, text.encode())

    def close(self) -> None:
        self.stream.close()
        os.close(self._write_fd)


@pytest.fixture(params=["pipe", "pty"])
def terminal(request) -> Iterator[_Terminal]:
    if request.param == "pipe":
        read_fd, write_fd = os.pipe()
    else:
        write_fd, read_fd = os.openpty()  # the test types on the master, the channel reads the slave
    term = _Terminal(read_fd, write_fd)
    yield term
    term.close()


def _ask(channel: CliApprovalChannel, request_id: str, timeout_s: float = 10.0, token: CancelToken | None = None):
    """Ask in a thread, as a tool call would; returns the thread and the list its answer lands in."""
    answers: list[bool] = []
    hook = _hook(token) if token is not None else None
    thread = threading.Thread(
        target=lambda: answers.append(
            channel.request(request_id, f"move arm ({request_id})", timeout_s, on_cancel=hook)
        )
    )
    thread.start()
    return thread, answers


def test_cli_channel_satisfies_the_protocol() -> None:
    assert isinstance(CliApprovalChannel(io.StringIO(), io.StringIO()), ApprovalChannel)


@pytest.mark.parametrize(("answer", "approved"), [("y\n", True), ("yes\n", True), ("n\n", False), ("\n", False)])
def test_a_line_typed_after_the_question_decides(terminal: _Terminal, answer: str, approved: bool) -> None:
    screen = _Screen()
    thread, answers = _ask(CliApprovalChannel(terminal.stream, screen), "7")
    assert screen.asked.wait(5)
    terminal.type(answer)
    thread.join(5)
    assert answers == [approved]
    assert "move arm (7)" in screen.getvalue() and ("approved" if approved else "denied") in screen.getvalue()


def test_a_yes_typed_before_the_question_approves_nothing(terminal: _Terminal) -> None:
    terminal.type("y\n")  # typed ahead, e.g. while the planner was still thinking
    screen = _Screen()
    assert CliApprovalChannel(terminal.stream, screen).request("8", "home", timeout_s=0.3) is False
    assert "no answer" in screen.getvalue()


def _answers(terminal: _Terminal, ahead: str, after: str) -> list[bool]:
    """Type `ahead` before the question is asked and `after` once it is on the screen."""
    terminal.type(ahead)
    screen = _Screen()
    thread, answers = _ask(CliApprovalChannel(terminal.stream, screen), "8")
    assert screen.asked.wait(5)
    terminal.type(after)
    thread.join(5)
    return answers


def test_a_yes_typed_ahead_without_enter_is_not_completed_by_a_later_enter(terminal: _Terminal) -> None:
    # Half a line: on a terminal it sits in the line editor until Enter.
    assert _answers(terminal, "y", "\n") == [False]


def test_only_the_line_typed_after_the_question_counts(terminal: _Terminal) -> None:
    # Stale answers to an earlier question, then a fresh yes.
    assert _answers(terminal, "n\nno\n", "y\n") == [True]


def test_no_answer_within_timeout_is_a_denial(terminal: _Terminal) -> None:
    screen = _Screen()
    assert CliApprovalChannel(terminal.stream, screen).request("9", "home", timeout_s=0.2) is False
    assert "denied" in screen.getvalue()


def test_cancel_while_waiting_returns_at_once_as_denied(terminal: _Terminal) -> None:
    screen, token = _Screen(), CancelToken()
    channel = CliApprovalChannel(terminal.stream, screen)
    thread, answers = _ask(channel, "10", timeout_s=30.0, token=token)
    assert screen.asked.wait(5)
    cancelled_at = time.monotonic()
    token.set("cancelled by the planner")
    thread.join(5)
    print(f"CLI cancel-during-approval latency: {1000 * (time.monotonic() - cancelled_at):.2f} ms")
    assert answers == [False] and "cancelled" in screen.getvalue()
    # The operator answers the retired question late: the "y" must not approve the next one.
    terminal.type("y\n")
    assert channel.request("11", "home", timeout_s=0.3) is False


def test_a_call_cancelled_before_it_asks_does_not_wait(terminal: _Terminal) -> None:
    token = CancelToken()
    token.set()
    assert CliApprovalChannel(terminal.stream, _Screen()).request("12", "home", 30.0, on_cancel=_hook(token)) is False


def _hook(token: CancelToken) -> Callable[[Callable[[], object]], Callable[[], None]]:
    """The `on_cancel` a ToolContext hands out, over a bare token."""

    def on_cancel(callback: Callable[[], object]) -> Callable[[], None]:
        token.add_callback(callback)
        return lambda: token.remove_callback(callback)

    return on_cancel
