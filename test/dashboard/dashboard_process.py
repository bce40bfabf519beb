"""`rpent run ... --dashboard` in a process of its own, as a person types it: its output is collected
as it comes, its printed URL read, and Ctrl-C (SIGINT) ends it."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path

from output_lines import OutputLines

RPENT = Path(sys.executable).with_name("rpent")
URL = re.compile(r"rpent dashboard: (http://\S+)")


class DashboardProcess(OutputLines):
    def __init__(self, cwd: Path, *flags: str) -> None:
        env = {k: v for k, v in os.environ.items() if k not in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY")}
        env.update(MUJOCO_GL=env.get("MUJOCO_GL", "egl"), RPENT_MEMORY_DIR=str(cwd / "memory"), PYTHONUNBUFFERED="1")
        self.url: str | None = None
        self._url_known = threading.Event()
        super().__init__([str(RPENT), *flags], cwd=cwd, env=env, bufsize=1, start_new_session=False)

    def line_read(self, line: str) -> None:
        match = URL.search(line)
        if match:
            self.url = match[1]
            self._url_known.set()

    def ended(self) -> None:
        self._url_known.set()  # the process ended: stop waiting

    def wait_url(self, timeout_s: float) -> str:
        self._url_known.wait(timeout_s)
        assert self.url, "no dashboard URL printed:\n" + "".join(self.lines)
        return self.url

    def wait_output(self, text: str, timeout_s: float = 10.0) -> bool:
        """True once `text` appears in what the process printed (it reaches the pipe a moment later)."""
        return self.wait_for_text(text, timeout_s)

    def interrupt(self, timeout_s: float = 60.0) -> int:
        """Ctrl-C, then the exit code once the process ended (killed if it does not end in time)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self.reader.join(10)
        return self.proc.returncode
