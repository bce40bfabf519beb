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

RPENT = Path(sys.executable).with_name("rpent")
URL = re.compile(r"rpent dashboard: (http://\S+)")


class DashboardProcess:
    def __init__(self, cwd: Path, *flags: str) -> None:
        env = {k: v for k, v in os.environ.items() if k not in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY")}
        env.update(MUJOCO_GL=env.get("MUJOCO_GL", "egl"), RPENT_MEMORY_DIR=str(cwd / "memory"), PYTHONUNBUFFERED="1")
        self.process = subprocess.Popen([str(RPENT), *flags], cwd=cwd, env=env, stdout=subprocess.PIPE,
                                        stderr=subprocess.STDOUT, text=True, bufsize=1)
        self.lines: list[str] = []
        self._new_line = threading.Condition()
        self.url: str | None = None
        self._url_known = threading.Event()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            with self._new_line:
                self.lines.append(line)
                self._new_line.notify_all()
            match = URL.search(line)
            if match:
                self.url = match[1]
                self._url_known.set()
        self._url_known.set()  # the process ended: stop waiting

    def wait_url(self, timeout_s: float) -> str:
        self._url_known.wait(timeout_s)
        assert self.url, "no dashboard URL printed:\n" + "".join(self.lines)
        return self.url

    def wait_output(self, text: str, timeout_s: float = 10.0) -> bool:
        """True once `text` appears in what the process printed (it reaches the pipe a moment later)."""
        with self._new_line:
            return self._new_line.wait_for(lambda: text in "".join(self.lines), timeout_s)

    @property
    def output(self) -> str:
        return "".join(self.lines)

    def interrupt(self, timeout_s: float = 60.0) -> int:
        """Ctrl-C, then the exit code once the process ended (killed if it does not end in time)."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)
        self._reader.join(10)
        return self.process.returncode
