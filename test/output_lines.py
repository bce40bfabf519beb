"""A command-line process whose output (stdout and stderr together) the test reads as it comes."""

from __future__ import annotations

import subprocess
import threading
from collections.abc import Sequence
from typing import Any


class OutputLines:
    """`argv` (in its own session unless `start_new_session=False`); its output lines collected by a
    reader thread, waitable. Used by the ROS tests' node and `ros2` processes and the dashboard's."""

    def __init__(self, argv: Sequence[str], **popen: Any) -> None:
        popen.setdefault("start_new_session", True)
        self.proc = subprocess.Popen(list(argv), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **popen)
        self.lines: list[str] = []
        self.eof = False  # every line is in `lines`: the output has ended
        self.changed = threading.Condition()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            with self.changed:
                self.lines.append(line)
                self.changed.notify_all()
            self.line_read(line)
        with self.changed:
            self.eof = True
            self.changed.notify_all()
        self.ended()

    def line_read(self, line: str) -> None:
        """Called (in the reader thread) with each line once it is in `lines`."""

    def ended(self) -> None:
        """Called (in the reader thread) once the output has ended."""

    @property
    def output(self) -> str:
        with self.changed:
            return "".join(self.lines)

    def wait_for_text(self, text: str, timeout_s: float) -> bool:
        """Until the output holds `text` or has ended (at most `timeout_s`): whether it holds it."""
        with self.changed:
            self.changed.wait_for(lambda: text in "".join(self.lines) or self.eof, timeout_s)
            return text in "".join(self.lines)
