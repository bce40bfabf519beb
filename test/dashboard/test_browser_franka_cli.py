"""The README's dashboard command, typed as a person would: `rpent run --robot franka --sim --dashboard`.

A fresh process, a real browser: the operator picks the replay planner and a bundled recipe on the
form, sees what the run will use, starts a task, then a second one after the scene reset; the
robot's own check (solved()) says both picks worked.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from browser_support import FRANKA_PICK, NEEDS_CHROMIUM, NEEDS_FRANKY_SIM, WAIT_MS, shot
from dashboard_process import DashboardProcess

pytestmark = [pytest.mark.slow, pytest.mark.timeout(420), NEEDS_CHROMIUM, NEEDS_FRANKY_SIM]


@pytest.fixture
def franka_dashboard(tmp_path: Path) -> Iterator[DashboardProcess]:
    dashboard = DashboardProcess(tmp_path, "run", "--robot", "franka", "--sim", "--dashboard", "--port", "0")
    yield dashboard
    dashboard.interrupt()


def run_task_from_form(page: Any, n: int) -> None:
    page.select_option("[data-testid=planner-select]", "replay")
    page.select_option("[data-testid=recipe-select]", str(FRANKA_PICK))
    assert page.inner_text("[data-testid=run-preview]") == \
        "Will run: scene reset, then replay of robots/franka/recipes/pick_cube.jsonl."
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
