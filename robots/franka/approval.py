"""Operator approval of motions: `approve` (asked before any motion) and the terminal `ApprovalChannel`."""

from __future__ import annotations

import select
import sys
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, TextIO

from rpent.tools import ToolContext

if TYPE_CHECKING:
    from robots.franka.franky_arm import FrankyArm
    from robots.franka.runtime import FrankaRuntime


def approve(ctx: ToolContext[FrankaRuntime], arms: Sequence[FrankyArm], description: str) -> None:
    """Ask the operator when any involved arm requires approval; raise if denied or unanswered."""
    needed = [a for a in arms if a.envelope.limits.require_approval]
    if not needed:
        return
    channel = ctx.robot.approval
    if channel is None:
        raise PermissionError(f"{needed[0].name}: approval is required but no operator channel is connected")
    timeout = min(a.envelope.limits.approval_timeout_s for a in needed)
    ctx.report("awaiting_approval", description)
    if not channel.request(str(ctx.call_id), f"{ctx.tool_name}: {description}", timeout):
        raise PermissionError(f"operator denied the motion or did not answer within {timeout:.0f} s ({description}); nothing moved")
    ctx.check_cancelled()


class CliApprovalChannel:
    """Prints the motion and waits for "y"/"n" on a line of input; no answer in time means deny."""

    def __init__(self, input_stream: TextIO | None = None, output_stream: TextIO | None = None) -> None:
        self._in = input_stream or sys.stdin
        self._out = output_stream or sys.stderr
        self._lock = threading.Lock()  # one question on the terminal at a time

    def request(self, request_id: str, description: str, timeout_s: float) -> bool:
        with self._lock:
            self._out.write(f"[approve {request_id}] {description}\n  approve? [y/N] ({timeout_s:.0f} s): ")
            self._out.flush()
            ready, _, _ = select.select([self._in], [], [], timeout_s)
            if not ready:
                self._out.write("\n  no answer: denied\n")
                self._out.flush()
                return False
            answer = self._in.readline().strip().lower()
            approved = answer in ("y", "yes")
            self._out.write(f"  {'approved' if approved else 'denied'}\n")
            self._out.flush()
            return approved
