"""The README's dashboard command, typed as a person would: `rpent run --robot franka --sim --dashboard`.

A fresh process, a real browser: the operator picks the replay planner and a bundled recipe on the
form, sees what the run will use, starts a task, then a second one after the scene reset; the
robot's own check (solved()) says both picks worked.
"""

from __future__ import annotations

import importlib.util
import os
import re
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from browser_support import CHROMIUM, WAIT_MS, shot
from dashboard_support import REPO

RPENT = Path(sys.executable).with_name("rpent")
PICK = REPO / "robots" / "franka" / "recipes" / "pick_cube.jsonl"
URL = re.compile(r"rpent dashboard: (http://127\.0\.0\.1:\d+/)")

pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(420),
    pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian's chromium at /usr/bin/chromium (apt-get install chromium)"),
    pytest.mark.skipif(importlib.util.find_spec("franky_sim") is None, reason="franky-sim is not installed (pip install rpent[sim])"),
]


class Dashboard:
    """`rpent run ... --dashboard` in its own process; its output is collected as it comes."""

    def __init__(self, cwd: Path, *flags: str) -> None:
        env = {k: v for k, v in os.environ.items() if k not in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY")}
        env.update(MUJOCO_GL=env.get("MUJOCO_GL", "egl"), RPENT_MEMORY_DIR=str(cwd / "memory"))
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

    def stop(self) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)
        self._reader.join(10)
        return self.process.returncode


@pytest.fixture
def franka_dashboard(tmp_path: Path) -> Iterator[Dashboard]:
    dashboard = Dashboard(tmp_path, "run", "--robot", "franka", "--sim", "--dashboard", "--port", "0")
    yield dashboard
    dashboard.stop()


def run_task_from_form(page: Any, n: int) -> None:
    page.select_option("[data-testid=planner-select]", "replay")
    page.select_option("[data-testid=recipe-select]", str(PICK))
    preview = page.inner_text("[data-testid=run-preview]")
    assert "planner replay" in preview and str(PICK) in preview and "reset first" in preview
    page.click("[data-testid=start-task]")
    page.wait_for_selector(f"[data-testid=task-title]:has-text('task-{n:03d}')", timeout=WAIT_MS)
    page.wait_for_selector("[data-testid=task-status]:has-text('finished')", timeout=180_000)


def test_the_readme_dashboard_command_runs_two_solved_picks_with_a_reset_between(franka_dashboard, page: Any) -> None:
    page.goto(franka_dashboard.wait_url(240))
    page.wait_for_selector("[data-testid=session-status]:has-text('ready')", timeout=WAIT_MS)
    # What is offered comes from what is configured: no API key here, so no api planner, and why.
    api = page.query_selector("[data-testid=planner-select] option[value=api]")
    assert api.get_attribute("disabled") is not None and "ANTHROPIC_API_KEY" in api.inner_text()
    assert page.is_checked("[data-testid=reset-check]")  # on by default in simulation
    # A refusal is answered with the field's rule and said on the server's console too.
    refused = httpx.post(franka_dashboard.url + "api/tasks", json={"fields": {}, "planner": "api"}, timeout=30)
    assert refused.status_code == 400 and refused.json()["error"].startswith("planner: api is not available here")
    assert franka_dashboard.wait_output("refused to start a task: planner: api is not available here")

    run_task_from_form(page, 1)
    assert page.inner_text("[data-testid=finish-status]") == "success"
    assert page.inner_text("[data-testid=solved]") == "true"
    assert page.inner_text("[data-testid=reset-status]") == "done"
    assert page.is_hidden("[data-testid=disagreement]")

    run_task_from_form(page, 2)  # the cube is back where the recipe expects it
    assert page.inner_text("[data-testid=finish-status]") == "success"
    assert page.inner_text("[data-testid=solved]") == "true"
    assert page.inner_text("[data-testid=reset-status]") == "done"
    assert page.is_hidden("[data-testid=disagreement]")
    shot(page, "franka-cli-two-tasks")
    assert franka_dashboard.wait_output("task-002: planner=replay recipe=")
    assert franka_dashboard.wait_output("scene reset in")
