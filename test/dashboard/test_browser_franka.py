"""The dashboard in headless Chromium against the simulated Franka (franky-sim in this process)."""

from __future__ import annotations

import itertools
import logging
import math
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from browser_support import FRANKA_PICK, NEEDS_CHROMIUM, NEEDS_FRANKY_SIM, WAIT_MS, open_dashboard, shot
from dashboard_support import Served, serving

from robots.franka.toolkit import SIM_IMAGE_ORDER
from rpent.cli.main import build_parser
from rpent.dashboard.cli import DashboardServer
from rpent.dashboard.session import DashboardSession
from rpent.robot import load_robot

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240), NEEDS_CHROMIUM, NEEDS_FRANKY_SIM]


@pytest.fixture
def franka_served(tmp_path: Path) -> Iterator[Any]:
    def start(*extra: str) -> Served:
        module = load_robot("franka")
        spec = module.get_robot_spec()
        parser = build_parser(spec)  # includes the dashboard flags
        args = parser.parse_args(["run", "--robot", "franka", "--sim", "--planner", "replay", "--recipe", str(FRANKA_PICK),
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
    assert row.get_attribute("data-status") == "cancelled" and "operator pressed Abort" in row.inner_text()
    # Stopped, not merely reported: after the sim's settling time the arm holds still, short of z = 0.3.
    wait_sim_seconds(runtime, 0.8)
    settled = runtime.arm().state().pose.position
    wait_sim_seconds(runtime, 1.0)
    assert math.dist(settled, runtime.arm().state().pose.position) < 0.005
    assert served.session.snapshot()["task"]["finish"]["operator_aborted"] is True
    shot(page, "franka-03-aborted")


def arm_box_corners(sim: Any) -> np.ndarray:
    """Corners of the bounding box of every visible geom of the arm and hand, in the arm's base frame."""
    import mujoco

    model, data = sim.model, sim.data
    corners = []
    with sim.lock:
        for geom in range(model.ngeom):
            body = mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_BODY, int(model.geom_bodyid[geom])) or ""
            if not body.startswith("robot0_") or model.geom_group[geom] > 2:  # groups 0-2 are rendered
                continue
            centre, half = model.geom_aabb[geom][:3], model.geom_aabb[geom][3:]
            rotation, position = data.geom_xmat[geom].reshape(3, 3), data.geom_xpos[geom]
            corners += [position + rotation @ (centre + np.multiply(signs, half)) for signs in itertools.product((-1, 1), repeat=3)]
    return np.array(corners)


def test_every_sim_camera_has_a_live_view_and_the_front_view_holds_the_whole_arm(
    franka_served, page: Any, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="rpent.dashboard"):
        served = franka_served()
    assert not [r for r in caplog.records if "has no FrameChannel" in r.getMessage()]
    runtime = served.session._shared_kwargs["runtime"]
    open_dashboard(page, served)
    for camera in SIM_IMAGE_ORDER:  # front, top and the wrist camera
        # Read in the same moment the picture is known loaded: the page swaps in the next frame meanwhile,
        # and a picture still loading has no natural size (a check after the wait once read 0 / 0).
        shown = page.wait_for_function(
            f"(() => {{ const img = document.querySelector('[data-testid=frame-{camera}]'); "
            "return img.naturalWidth > 0 && img.naturalHeight > 0 && [img.clientWidth / img.clientHeight, "
            "img.naturalWidth / img.naturalHeight, img.style.objectFit || getComputedStyle(img).objectFit]; })()",
            timeout=WAIT_MS).json_value()
        assert shown[0] == pytest.approx(shown[1], rel=0.02) and shown[2] != "cover", (camera, shown)  # not cropped
    # The front camera's picture holds every part of the arm at home, with a margin.
    frame = next(c for c in runtime.cameras if c.name == "front").capture_frame()
    to_camera = np.linalg.inv(frame.T_base_camera)
    points = arm_box_corners(runtime.sim) @ to_camera[:3, :3].T + to_camera[:3, 3]
    k = frame.intrinsics
    rows, cols = k.fy * points[:, 1] / points[:, 2] + k.cy, k.fx * points[:, 0] / points[:, 2] + k.cx
    assert rows.min() > 5 and rows.max() < frame.height - 5, (rows.min(), rows.max())
    assert cols.min() > 5 and cols.max() < frame.width - 5, (cols.min(), cols.max())
    shot(page, "franka-00-load")


def test_a_pending_approval_counts_down_and_its_timeline_row_awaits_approval(franka_served, page: Any) -> None:
    served = franka_served("--approve-motions")
    open_dashboard(page, served)
    page.click("[data-testid=start-task]")
    card = "[data-testid=request][data-kind=approval]:has-text('home')"
    page.wait_for_selector(card, timeout=60_000)
    row = "[data-testid=timeline-row][data-tool=home]"
    page.wait_for_selector(f"{row}[data-status=awaiting_approval]", timeout=WAIT_MS)
    assert page.inner_text(f"{row} .pill") == "awaiting approval"
    countdown = page.query_selector(f"{card} [data-testid=countdown]")
    seconds, said = countdown.evaluate("counter => [counter.dataset.seconds, counter.textContent]")  # one instant
    first = int(seconds)
    assert 25 <= first <= 30  # the safety file's approval_timeout_s: 30
    assert said == f"denied in {first} s"
    page.wait_for_function("([counter, first]) => Number(counter.dataset.seconds) < first", arg=[countdown, first],
                           timeout=WAIT_MS)
    page.click(f"{card} [data-testid=approve]")
    page.wait_for_selector(f"{row}[data-status=ok]", timeout=60_000)
    assert page.inner_text(f"{row} .pill") == "ok"
    # The next motions ask in turn; the third one is left waiting for the screenshot of a running task.
    page.click("[data-testid=request][data-kind=approval]:has-text('open_gripper') [data-testid=approve]", timeout=60_000)
    page.wait_for_selector("[data-testid=timeline-row][data-tool=open_gripper][data-status=ok]", timeout=60_000)
    page.wait_for_selector("[data-testid=request][data-kind=approval]:has-text('move_to')", timeout=60_000)
    page.wait_for_selector("[data-testid=timeline-row][data-tool=move_to][data-status=awaiting_approval]", timeout=WAIT_MS)
    shot(page, "franka-01-approval-pending")


def test_a_grasp_that_closes_on_nothing_shows_finish_and_solved_disagreeing(franka_served, page: Any) -> None:
    # The cube is not where the bundled recipe grasps; the replay goes on to the recipe's own finish.
    served = franka_served("--sim-seed", "7", "--continue-on-error")
    open_dashboard(page, served)
    page.click("[data-testid=start-task]")
    page.wait_for_selector("[data-testid=task-status]:has-text('finished')", timeout=180_000)
    assert page.inner_text("[data-testid=finish-status]") == "success"
    assert page.inner_text("[data-testid=solved]") == "false"
    assert "finish=success but solved()=False" in page.inner_text("[data-testid=disagreement]")
    history = page.inner_text("[data-testid=task-history] li[data-task=task-001]")
    assert " ".join(history.split()) == "task-001 finished finish success · solved() no · finish and solved() disagree"
    grasp = "[data-testid=timeline-row][data-tool=grasp]"
    assert page.get_attribute(grasp, "data-status") == "failed"
    assert "grasped=false" in page.inner_text(grasp)
    # Every observation's thumbnails say which camera took them.
    cameras = [a.get_attribute("data-camera") for a in page.query_selector_all(f"{grasp} .thumb")]
    assert cameras == SIM_IMAGE_ORDER
    assert [s.inner_text() for s in page.query_selector_all(f"{grasp} .thumb span")] == SIM_IMAGE_ORDER
    shot(page, "franka-04-finish-solved-disagree")
