"""Run `python -m rpent ...` as a person types it, from the checkout, and read what they would see."""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def rpent_env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault("MUJOCO_GL", "egl")
    for key in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "RPENT_MODEL"):
        env.pop(key, None)  # what a newcomer without a key sees
    env.update(extra)
    return env


def rpent(*args: str, timeout: float = 120, env: dict[str, str] | None = None,
          cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "rpent", *args], cwd=cwd, env=env or rpent_env(),
                          capture_output=True, text=True, timeout=timeout)


class Running:
    """A started `rpent` command whose stderr and stdout lines can be waited for (bounded)."""

    def __init__(self, *args: str, cwd: Path = REPO, env: dict[str, str] | None = None,
                 sigint_ignored: bool = False, stdin: int | None = None) -> None:
        """`sigint_ignored`: start it as a script's background job is started (`cmd &` in a
        non-interactive shell), with SIGINT ignored; it still gets a `kill -INT`. Otherwise SIGINT is at
        its default, as from a terminal, however the test run itself was started."""
        disposition = signal.SIG_IGN if sigint_ignored else signal.SIG_DFL
        preexec = lambda: signal.signal(signal.SIGINT, disposition)  # noqa: E731
        self.proc = subprocess.Popen([sys.executable, "-m", "rpent", *args], cwd=cwd, env=env or rpent_env(),
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=stdin, text=True,
                                     preexec_fn=preexec)
        self.lines: queue.Queue[str] = queue.Queue()
        self.seen: list[str] = []
        self._pumps = [threading.Thread(target=self._pump, args=(stream,), daemon=True)
                       for stream in (self.proc.stdout, self.proc.stderr)]
        for pump in self._pumps:
            pump.start()

    def _pump(self, stream) -> None:
        for line in stream:
            self.lines.put(line)

    def wait_for(self, text: str, timeout: float = 60) -> str:
        deadline = threading.Event()
        timer = threading.Timer(timeout, deadline.set)
        timer.start()
        try:
            while not deadline.is_set():
                try:
                    line = self.lines.get(timeout=0.5)
                except queue.Empty:
                    if self.proc.poll() is not None and self.lines.empty():
                        break
                    continue
                self.seen.append(line)
                if text in line:
                    return line
        finally:
            timer.cancel()
        raise AssertionError(f"{text!r} never appeared; output so far:\n{''.join(self.seen)}")

    def signal_and_wait(self, sig: int, timeout: float = 60) -> int:
        self.proc.send_signal(sig)
        return self.wait(timeout)

    def wait(self, timeout: float = 60) -> int:
        try:
            return self.proc.wait(timeout)
        finally:
            self.kill()

    def output(self) -> str:
        """Everything printed so far (all of it once the process has ended)."""
        if self.proc.poll() is not None:
            for pump in self._pumps:
                pump.join(10)
        while not self.lines.empty():
            self.seen.append(self.lines.get())
        return "".join(self.seen)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)
