"""The dashboard in headless Chromium against the simulated Franka (franky-sim in this process)."""

from __future__ import annotations

import importlib.util
import math
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from browser_support import CHROMIUM, WAIT_MS, open_dashboard, shot
from dashboard_support import REPO, Served, serving

from rpent.cli.main import build_parser
from rpent.dashboard.cli import DashboardServer
from rpent.dashboard.session import DashboardSession
from rpent.robot import load_robot

PICK = REPO / "robots" / "franka" / "recipes" / "pick_cube.jsonl"

pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(240),
    pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian's chromium at /usr/bin/chromium (apt-get install chromium)"),
    pytest.mark.skipif(importlib.util.find_spec("franky_sim") is None, reason="franky-sim is not installed (pip install rpent[sim])"),
]


@pytest.fixture
def franka_served(tmp_path: Path) -> Iterator[Any]:
    def start(*extra: str) -> Served:
        module = load_robot("franka")
        spec = module.get_robot_spec()
        parser = build_parser(spec)  # includes the dashboard flags
        args = parser.parse_args(["run", "--robot", "franka", "--sim", "--planner", "replay", "--recipe", str(PICK),
                                  "--output-dir", str(tmp_path / "runs"), "--memory-dir", str(tmp_path / "memory"), *extra])
        session = DashboardSession(args=args, spec=spec, robot=module, output_root=tmp_path / "runs")
        session.start()
        return Served(session, DashboardServer(session, host="127.0.0.1", port=0).start())

    with serving(start) as make:
        yield make


def wait_sim_seconds(runtime: Any, seconds: float, wall_timeout_s: float = 30.0) -> None:
    end = runtime.sim.time_s + seconds
    deadline = time.monotonic() + wall_timeout_s
    while runtime.sim.time_s < end:
        assert time.monotonic() < deadline, "simulator stalled"
        time.sleep(0.01)


def test_franka_motions_wait_for_approval_and_a_denied_motion_does_not_move(franka_served, page: Any) -> None:
    served = franka_served("--approve-motions")
    runtime = served.session._shared_kwargs["runtime"]
    open_dashboard(page, served)
    page.wait_for_function("document.querySelector('[data-testid=frame-front]').naturalWidth > 0", timeout=WAIT_MS)
    page.click("[data-testid=start-task]")
    # home and open_gripper: approve them, and they run.
    for tool in ("home", "open_gripper"):
        card = f"[data-testid=request][data-kind=approval]:has-text('{tool}')"
        page.wait_for_selector(card, timeout=60_000)
        if tool == "home":
            shot(page, "franka-01-approval")
        page.click(f"{card} [data-testid=approve]")
        page.wait_for_selector(f"[data-testid=timeline-row][data-tool={tool}][data-status=ok]", timeout=60_000)
    # The first move_to: deny it; nothing is sent to the arm and the replay stops there.
    card = "[data-testid=request][data-kind=approval]:has-text('move_to')"
    page.wait_for_selector(card, timeout=60_000)
    before = runtime.arm().state().pose.position
    page.click(f"{card} [data-testid=deny]")
    page.wait_for_selector("[data-testid=timeline-row][data-tool=move_to][data-status=error]", timeout=WAIT_MS)
    page.wait_for_selector("[data-testid=task-status]:has-text('error')", timeout=WAIT_MS)
    row = page.inner_text("[data-testid=timeline-row][data-tool=move_to]")
    assert "operator denied the motion" in row
    wait_sim_seconds(runtime, 0.5)
    assert math.dist(before, runtime.arm().state().pose.position) < 0.005
    shot(page, "franka-02-denied")


def test_franka_abort_mid_motion_stops_the_arm(franka_served, page: Any) -> None:
    served = franka_served()
    runtime = served.session._shared_kwargs["runtime"]
    open_dashboard(page, served)
    page.click("[data-testid=start-task]")
    page.wait_for_selector("[data-testid=timeline-row][data-tool=move_to][data-status=running]", timeout=90_000)
    page.click("[data-testid=abort]")
    page.wait_for_selector("[data-testid=task-status]:has-text('aborted')", timeout=60_000)
    row = page.query_selector("[data-testid=timeline-row][data-tool=move_to]")
    assert row.get_attribute("data-status") == "error" and "cancelled" in row.inner_text()
    # Stopped, not merely reported: after the sim's settling time the arm holds still, short of z = 0.3.
    wait_sim_seconds(runtime, 0.8)
    settled = runtime.arm().state().pose.position
    wait_sim_seconds(runtime, 1.0)
    assert math.dist(settled, runtime.arm().state().pose.position) < 0.005
    assert served.session.snapshot()["task"]["finish"]["operator_aborted"] is True
    shot(page, "franka-03-aborted")
