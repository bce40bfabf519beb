"""Operator approval of motions on a terminal: the CLI `ApprovalChannel`."""

from __future__ import annotations

import select
import sys
import threading
from typing import TextIO


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
