"""`rpent run --robot toy ... --dashboard` as its own process, watched in headless Chromium: what the
page says when the terminal ends the session, and which address the printed URL may use."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from browser_support import CHROMIUM, WAIT_MS, open_page, shot
from dashboard_process import DashboardProcess
from dashboard_support import TOY_RECIPE

pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(180),
    pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian's chromium at /usr/bin/chromium (apt-get install chromium)"),
]

CONTROLS = ("start-task", "abort", "send-message", "add-note")


@pytest.fixture
def toy_dashboard(tmp_path: Path) -> Iterator[Callable[..., DashboardProcess]]:
    started: list[DashboardProcess] = []

    def start(*flags: str) -> DashboardProcess:
        process = DashboardProcess(tmp_path, "run", "--robot", "toy", "--planner", "replay", "--recipe", str(TOY_RECIPE),
                                   "--output-dir", str(tmp_path / "runs"), "--dashboard", "--port", "0", *flags)
        started.append(process)
        return process

    yield start
    for process in started:
        process.interrupt()


def test_ctrl_c_on_the_terminal_shows_the_task_interrupted_and_disables_the_controls(toy_dashboard, page: Any) -> None:
    dashboard = toy_dashboard("--speed", "0.01")  # the first move would take ~30 s
    open_page(page, dashboard.wait_url(60))
    page.click("[data-testid=start-task]")
    page.wait_for_selector("[data-testid=timeline-row][data-tool=move_to][data-status=running]", timeout=WAIT_MS)
    assert page.is_enabled("[data-testid=abort]")
    assert dashboard.interrupt() == 130
    # The page learned how the session ended before the server went away, and says so.
    assert page.inner_text("[data-testid=task-status]") == "aborted"
    assert page.inner_text("[data-testid=session-status]") == "stopped"
    assert page.inner_text("[data-testid=session-detail]") == "interrupted (Ctrl-C)"
    assert page.inner_text("[data-testid=link-status]") == "ended"
    assert "interrupted (Ctrl-C)" in page.inner_text("[data-testid=result]")
    for control in CONTROLS:
        assert page.is_disabled(f"[data-testid={control}]"), control
    shot(page, "interrupted-by-ctrl-c")


def test_a_loopback_address_other_than_127_0_0_1_serves_the_url_it_prints(toy_dashboard, page: Any) -> None:
    dashboard = toy_dashboard("--host", "127.0.0.150")
    url = dashboard.wait_url(60)
    assert url.startswith("http://127.0.0.150:") and "token" not in url
    open_page(page, url)
    assert page.inner_text("[data-testid=robot-name]") == "toy"
    # Any other name is still refused (DNS rebinding), and the terminal says why, once per name.
    for host in ("rebind.example", "rebind.example", "other.example"):
        refused = httpx.get(url + "api/state", headers={"Host": host}, timeout=10)
        assert refused.status_code == 400
    assert dashboard.wait_output("Host 'other.example'")  # logged in order: after any line of the first name
    refusals = [line for line in dashboard.lines if "Host 'rebind.example'" in line]
    assert len(refusals) == 1, dashboard.output
    assert "refused" in refusals[0] and "127.0.0.150" in refusals[0] and "--dashboard-token" in refusals[0]
