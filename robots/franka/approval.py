"""Operator approval of motions: `approve` (asked before any motion) and the terminal `ApprovalChannel`."""

from __future__ import annotations

import getpass
import inspect
import logging
import os
import select
import sys
import termios
import threading
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, TextIO

from rpent.runtime.arm import ApprovalChannel, OnCancel
from rpent.tools import ToolContext

if TYPE_CHECKING:
    from robots.franka.hardware.franky_arm import FrankyArm
    from robots.franka.runtime import FrankaRuntime

log = logging.getLogger(__name__)
_MAX_DISCARD_READS = 256  # of 4 KiB: far more than anyone types ahead
_TIMEOUT_SLACK_S = 0.05  # a wait this close to the timeout ended by it (channels return at their deadline)


def approve(ctx: ToolContext[FrankaRuntime], arms: Sequence[FrankyArm], description: str) -> None:
    """Ask the operator when any involved arm requires approval; raise if denied, unanswered or cancelled."""
    needed = [a for a in arms if a.envelope.limits.require_approval]
    if not needed:
        return
    channel = ctx.robot.approval
    if channel is None:
        raise PermissionError(f"{needed[0].name}: approval is required but no operator channel is connected")
    timeout = min(a.envelope.limits.approval_timeout_s for a in needed)
    # The wait is timed on the monotonic clock (a wall clock stepped meanwhile would make it 0 or negative);
    # the record's answer time is the request's wall time plus that wait.
    asked_at, asked = time.time(), time.monotonic()
    ctx.report("awaiting_approval", description)  # the dashboard's operator_request event has its deadline
    approved = _request(channel, str(ctx.call_id), f"{ctx.tool_name}: {description}", timeout, ctx.on_cancel)
    waited = time.monotonic() - asked
    # A cancel wins over any answer, and ends the call as cancelled, not denied.
    outcome = "cancelled" if ctx.cancelled else "approved" if approved else (
        "timed_out" if waited >= timeout - _TIMEOUT_SLACK_S else "denied")
    by = operator_of(channel)
    ctx.record_approval(motion=description, outcome=outcome, by=by, requested_at=asked_at,
                        answered_at=asked_at + waited, timeout_s=timeout)
    answer = {"approved": f"approved by {by}", "denied": f"denied by {by}", "timed_out": f"no answer from {by}: denied",
              "cancelled": "withdrawn: the call was cancelled"}[outcome]
    log.info("approval of call %d (%s): %s after %.1f s: %s", ctx.call_id, ctx.tool_name, answer, waited,
             description)
    ctx.check_cancelled()
    if not approved:
        raise PermissionError(f"operator denied the motion or did not answer within {timeout:.0f} s ({description}); nothing moved")


def operator_of(channel: ApprovalChannel) -> str:
    """Who answers on this channel, for the record: its `operator` attribute, else its class name."""
    return str(getattr(channel, "operator", None) or type(channel).__name__)


def _request(channel: ApprovalChannel, request_id: str, text: str, timeout_s: float, on_cancel: OnCancel) -> bool:
    if _takes_on_cancel(channel):
        return channel.request(request_id, text, timeout_s, on_cancel=on_cancel)
    # A channel written before `on_cancel` existed: its wait cannot be cut short, only overruled.
    return channel.request(request_id, text, timeout_s)


def _takes_on_cancel(channel: ApprovalChannel) -> bool:
    try:
        parameters = inspect.signature(channel.request).parameters.values()
    except (TypeError, ValueError):  # no signature to read (a C callable): do not guess
        return False
    return any(p.name == "on_cancel" or p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters)


class CliApprovalChannel:
    """Prints the motion and waits for "y"/"n" on a line typed after the question; silence denies.

    Reads the input's file descriptor directly: a select() on a buffered text stream misses lines
    the buffer already holds, and anything typed ahead must be discarded, not just skipped.
    """

    def __init__(self, input_stream: TextIO | None = None, output_stream: TextIO | None = None) -> None:
        self.operator = f"terminal ({getpass.getuser()})"
        self._in = input_stream or sys.stdin
        self._out = output_stream or sys.stderr
        self._lock = threading.Lock()  # one question on the terminal at a time

    def request(self, request_id: str, description: str, timeout_s: float, on_cancel: OnCancel | None = None) -> bool:
        with self._lock, _Wakeup() as wakeup:
            unhook = on_cancel(wakeup.set) if on_cancel is not None else None
            try:
                return self._ask(request_id, description, timeout_s, wakeup)
            finally:
                if unhook is not None:
                    unhook()

    def _ask(self, request_id: str, description: str, timeout_s: float, wakeup: _Wakeup) -> bool:
        if wakeup.is_set:  # cancelled before it asked: do not put a dead question on the screen
            return False
        fd = self._in.fileno()
        discarded = _discard_pending_input(fd)
        if discarded:
            log.info("approval %s: discarded input typed before the question: %r", request_id, discarded[:80])
        self._say(f"[approve {request_id}] {description}\n  approve? [y/N] ({timeout_s:.0f} s): ")
        line = _read_line(fd, time.monotonic() + timeout_s, wakeup)
        if wakeup.is_set:
            self._say(f"\n  cancelled: denied; a later answer to {request_id} counts for nothing\n")
            return False
        if line is None:
            self._say("\n  no answer: denied\n")
            return False
        approved = line.strip().lower() in ("y", "yes")
        self._say(f"  {'approved' if approved else 'denied'}\n")
        return approved

    def _say(self, text: str) -> None:
        self._out.write(text)
        self._out.flush()


class _Wakeup:
    """A pipe a cancel callback writes one byte to, so the select() waiting for input returns at once.

    The lock orders `set` against `close`: a callback that runs after the question is over (a
    cancel racing its unhook) must not write to a closed, possibly reused, descriptor.
    """

    def __init__(self) -> None:
        self.fd, self._write_fd = os.pipe()
        self._lock = threading.Lock()
        self._open = True
        self.is_set = False

    def set(self) -> None:
        with self._lock:
            if self._open and not self.is_set:
                self.is_set = True
                os.write(self._write_fd, b"x")

    def __enter__(self) -> _Wakeup:
        return self

    def __exit__(self, *exc: object) -> None:
        with self._lock:
            self._open = False
            os.close(self.fd)
            os.close(self._write_fd)


def _discard_pending_input(fd: int) -> str:
    """Drop what was typed before the question; returns it (for the log).

    A terminal's queue is flushed (tcflush also drops what the line discipline has not handed over
    yet, such as a half-typed line); for a pipe or file, whatever is readable right now is drained.
    """
    if os.isatty(fd):
        termios.tcflush(fd, termios.TCIFLUSH)
    dropped = b""
    # Bounded: a writer that never stops (`yes | rpent ...`) must not keep the question from being asked.
    for _ in range(_MAX_DISCARD_READS):
        if not select.select([fd], [], [], 0)[0]:
            break
        chunk = os.read(fd, 4096)
        if not chunk:  # end of input: there is nothing more to drop
            break
        dropped += chunk
    return dropped.decode(errors="replace")


def _read_line(fd: int, deadline: float, wakeup: _Wakeup) -> str | None:
    """The first line read from `fd`; None on timeout, end of input or wake-up."""
    line = b""
    while not line.endswith(b"\n"):
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return None
        ready = select.select([fd, wakeup.fd], [], [], remaining)[0]
        if wakeup.fd in ready:
            return None
        if fd in ready:
            chunk = os.read(fd, 1024)
            if not chunk:  # the operator's input closed: nobody can say yes
                return None
            line += chunk
    return line.split(b"\n", 1)[0].decode(errors="replace")
