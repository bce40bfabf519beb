"""Shared components start once per session, unique ones once per task; frame channels show the newest picture."""

from __future__ import annotations

import io
import json
import threading
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from dashboard_support import TOY_RECIPE, toy_args
from PIL import Image

from rpent.dashboard.frames import FrameHub
from rpent.dashboard.session import DashboardSession
from rpent.robot import load_robot
from rpent.robot.spec import Dashboard, FrameChannel, RuntimeComponent, TaskField

pytestmark = pytest.mark.timeout(60)
toy = load_robot("toy")


class TwoPartToy(type(toy.get_robot_spec())):  # the toy world shared, a per-task "policy" part
    dashboard = Dashboard(
        task_fields=(TaskField("task", "Task", "text", default="Put the red block in the bin."),
                     TaskField("max_turns", "Max steps", "int", default=60)),
        components=(RuntimeComponent("world", "Toy world", shared=True), RuntimeComponent("policy", "Policy", shared=False)),
        frame_channels=(FrameChannel("top", "Top view", max_fps=20.0),),
    )

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []

    def init_runtime(self, config, *, selection=None, events) -> dict[str, Any]:
        self.calls.append(("init", list(selection or [])))
        if selection == ["world"]:
            return super().init_runtime(config, selection=selection, events=events)
        return {"policy": object()}

    def stop_runtime(self, runtime_kwargs: dict[str, Any]) -> None:
        self.calls.append(("stop", sorted(runtime_kwargs)))


def ended(state: dict) -> bool:
    return bool(state["task"]) and state["task"]["status"] not in ("running", "aborting")


def test_shared_components_start_once_and_unique_ones_start_and_stop_around_each_task(tmp_path: Path) -> None:
    spec = TwoPartToy()
    args = toy_args(tmp_path, "--planner", "replay", "--recipe", str(TOY_RECIPE))
    session = DashboardSession(args=args, spec=spec, robot=SimpleNamespace(get_toolkit=toy.get_toolkit), output_root=tmp_path)
    session.start()
    try:
        for n, turns in ((1, "60"), (2, "2")):
            session.start_task({"task": f"run {n}", "max_turns": turns})
            state = session.sink.wait_for(lambda s, n=n: ended(s) and s["task"]["id"] == f"task-00{n}", 30)
            assert state is not None
            rows = {c["name"]: c["status"] for c in state["components"]}
            assert rows == {"world": "ready", "policy": "stopped"}
        # The form's int field reached the run like --max-turns would: the second task stopped after 2 steps.
        assert state["task"]["status"] == "turn_limit" and state["task"]["counters"]["turns"] == 2
    finally:
        session.stop()
    assert spec.calls == [("init", ["world"]), ("init", ["policy"]), ("stop", ["policy"]), ("init", ["policy"]),
                          ("stop", ["policy"]), ("stop", ["frame_sources", "scene_reset", "world"])]


def test_unchanged_pictures_are_not_announced_and_a_broken_camera_keeps_the_last_frame() -> None:
    announced = threading.Event()
    picture = np.zeros((8, 8, 3), np.uint8)
    broken = {"now": False}

    def camera() -> np.ndarray:
        if broken["now"]:
            raise OSError("camera unplugged")
        return picture

    hub = FrameHub({"top": FrameChannel("top", "Top")}, on_new_frame=announced.set)
    hub._sources["top"] = camera  # sampled by hand below, without the sampler thread
    previous = hub.sample_once("top")
    assert announced.is_set() and hub.latest("top").n == 1
    announced.clear()
    previous = hub.sample_once("top", previous)
    assert not announced.is_set() and hub.latest("top").n == 1
    picture[0, 0] = (255, 0, 0)
    previous = hub.sample_once("top", previous)
    assert hub.latest("top").n == 2
    jpeg = hub.latest("top").jpeg
    broken["now"] = True
    hub.sample_once("top", previous)
    latest = hub.latest("top")
    assert latest.n == 2 and latest.jpeg == jpeg and "camera unplugged" in latest.error


def test_frame_channel_serves_the_robots_current_picture_as_jpeg(served_factory) -> None:
    served = served_factory("--planner", "replay", "--recipe", str(TOY_RECIPE))
    assert served.client.get("/frames/side.jpg").status_code == 404
    with served.client.stream("GET", "/api/events") as events:  # someone watches: the sampler runs
        lines = events.iter_lines()
        assert any(line == "event: frame" for line in lines)
    response = served.client.get("/frames/top.jpg")
    assert response.headers["content-type"] == "image/jpeg" and int(response.headers["x-frame-number"]) >= 1
    image = np.asarray(Image.open(io.BytesIO(response.content)).convert("RGB"))
    expected = served.session._shared_kwargs["world"].render_top()
    assert image.shape == expected.shape
    assert np.abs(image.astype(int) - expected.astype(int)).mean() < 8  # JPEG is lossy, the scene is the same


class _CountingPlanner:
    """A planner that reports each turn through `on_usage` (the live-counter hook) and then finishes."""

    def __init__(self) -> None:
        self.on_usage = None
        self.on_text = None

    def solve(self, *, system_prompt, user_message, toolkit, max_turns, input_queue=None, dashboard_interaction=None):
        from rpent.planner.base import PlannerResult, PlannerStatus

        for turn in (1, 2):
            self.on_text(f"turn {turn}. ")
            self.on_usage(turn, {"total_tokens": 100 * turn})
        toolkit.execute_tool("finish", {"status": "failure", "summary": "counted"})
        return PlannerResult(PlannerStatus.FINISHED, "finish accepted", turns=2)


def test_planner_text_and_live_counters_reach_the_task_view(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import rpent.dashboard.session as session_module

    monkeypatch.setattr(session_module, "make_planner", lambda args, spec: _CountingPlanner())
    args = toy_args(tmp_path, "--planner", "replay", "--recipe", str(TOY_RECIPE))
    session = DashboardSession(args=args, spec=toy.get_robot_spec(), robot=toy, output_root=tmp_path)
    session.start()
    try:
        session.start_task({})
        state = session.sink.wait_for(ended, 30)
    finally:
        session.stop()
    assert state["task"]["text"] == "turn 1. turn 2. "
    events = [(e.kind, json.loads(e.data)) for e in session.bus.read(0, limit=10_000).events]
    kinds = [kind for kind, _ in events]
    counters = [(p["turns"], p["tokens"]) for kind, p in events if kind == "counters"]
    assert counters == [(1, 100), (2, 200)]
    assert kinds.index("counters") < kinds.index("tool_finished") < kinds.index("task_ended")  # live, not at the end


def test_franka_robots_offer_a_live_view_of_every_simulated_camera() -> None:
    from robots.dual_franka.toolkit import DUAL_SIM_IMAGE_ORDER
    from robots.franka.toolkit import SIM_IMAGE_ORDER

    # Every frame source the sim runtime returns (one per camera, these names) has a channel to show it in.
    for robot, cameras in (("franka", SIM_IMAGE_ORDER), ("dual_franka", DUAL_SIM_IMAGE_ORDER)):
        spec = load_robot(robot).get_robot_spec()
        assert [c.name for c in spec.dashboard.frame_channels] == cameras, robot
