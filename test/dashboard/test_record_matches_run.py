"""docs/dashboard.md says what a dashboard task's record holds compared with `rpent run`'s: check it.

Both records come from the real commands: `rpent run` in a subprocess, a task from a dashboard session.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from dashboard_support import REPO, TOY_RECIPE

DOC = REPO / "docs" / "dashboard.md"
RPENT = Path(sys.executable).with_name("rpent")


def _names(line_start: str) -> set[str]:
    line = next(line for line in DOC.read_text().splitlines() if line.startswith(line_start))
    return set(re.findall(r"`([^`]+)`", line.split(":", 1)[1]))


def _entries(folder: Path) -> set[str]:
    return {p.name + ("/" if p.is_dir() else "") for p in folder.iterdir()}


def test_a_dashboard_task_record_is_what_rpent_run_writes_plus_clips_as_the_doc_says(served_factory, tmp_path: Path) -> None:
    env = {**os.environ, "RPENT_MEMORY_DIR": str(tmp_path / "memory")}
    run_dir = tmp_path / "run"
    done = subprocess.run([str(RPENT), "run", "--robot", "toy", "--planner", "replay", "--recipe", str(TOY_RECIPE),
                           "--output-dir", str(run_dir)], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr

    served = served_factory("--planner", "replay", "--recipe", str(TOY_RECIPE))
    assert served.client.post("/api/tasks", json={"fields": {}}).status_code == 201
    served.wait_state(lambda s: bool(s["task"]) and s["task"]["status"] == "finished")
    task_dir = tmp_path / "runs" / "task-001"

    as_run = {name.replace("<robot>", "toy") for name in _names("- as `rpent run`")}
    added = _names("- added by the dashboard")
    assert _entries(run_dir) == as_run
    assert _entries(task_dir) == as_run | added
