"""The CLI approval channel answers from a line of operator input, and denies on silence."""

from __future__ import annotations

import io
import os
import threading
from collections.abc import Iterator

import pytest

from robots.franka.approval import CliApprovalChannel
from rpent.runtime.arm import ApprovalChannel


@pytest.fixture
def terminal() -> Iterator[tuple[io.TextIOWrapper, io.TextIOWrapper, io.StringIO]]:
    read_fd, write_fd = os.pipe()
    reader = os.fdopen(read_fd, "r")
    writer = os.fdopen(write_fd, "w")
    yield reader, writer, io.StringIO()
    reader.close()
    writer.close()


def test_cli_channel_satisfies_the_protocol() -> None:
    assert isinstance(CliApprovalChannel(io.StringIO(), io.StringIO()), ApprovalChannel)


@pytest.mark.parametrize(("answer", "approved"), [("y\n", True), ("yes\n", True), ("n\n", False), ("\n", False)])
def test_operator_answer_decides(terminal, answer: str, approved: bool) -> None:
    reader, writer, out = terminal
    writer.write(answer)
    writer.flush()
    channel = CliApprovalChannel(reader, out)
    assert channel.request("7", "move_to arm to (0.5, 0.0, 0.3)", timeout_s=5.0) is approved
    assert "move_to arm to (0.5, 0.0, 0.3)" in out.getvalue()


@pytest.mark.timeout(10)
def test_no_answer_within_timeout_is_a_denial(terminal) -> None:
    reader, _writer, out = terminal
    assert CliApprovalChannel(reader, out).request("8", "home", timeout_s=0.2) is False
    assert "denied" in out.getvalue()


@pytest.mark.timeout(10)
def test_answer_arriving_while_waiting_is_taken(terminal) -> None:
    reader, writer, out = terminal
    asked = threading.Event()

    class Out(io.StringIO):
        def flush(self) -> None:
            super().flush()
            asked.set()

    result: list[bool] = []
    thread = threading.Thread(
        target=lambda: result.append(CliApprovalChannel(reader, Out()).request("9", "grasp", timeout_s=5.0))
    )
    thread.start()
    assert asked.wait(5.0)
    writer.write("y\n")
    writer.flush()
    thread.join(5.0)
    assert result == [True]
