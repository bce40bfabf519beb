"""Between dashboard tasks on the simulated Franka: without a reset the second pick fails at its grasp, with one it is solved."""

from __future__ import annotations

import importlib.util
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest
from dashboard_support import REPO, Served

from rpent.cli.main import build_parser
from rpent.dashboard.cli import DashboardServer
from rpent.dashboard.session import DashboardSession
from rpent.robot import load_robot

PICK = str(REPO / "robots" / "franka" / "recipes" / "pick_cube.jsonl")

pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(400),
    pytest.mark.skipif(importlib.util.find_spec("franky_sim") is None, reason="franky-sim is not installed (pip install rpent[sim])"),
]


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    module = load_robot("franka")
    spec = module.get_robot_spec()
    args = build_parser(spec).parse_args(["run", "--robot", "franka", "--sim", "--output-dir", str(tmp_path / "runs"),
                                          "--memory-dir", str(tmp_path / "memory")])
    session = DashboardSession(args=args, spec=spec, robot=module, output_root=tmp_path / "runs")
    session.start()
    served = Served(session, DashboardServer(session, host="127.0.0.1", port=0).start())
    yield served
    served.client.close()
    served.server.stop()
    served.session.stop()


def run_task(served: Served, n: int, reset: bool) -> dict:
    response = served.client.post("/api/tasks", json={"fields": {}, "planner": "replay", "recipe": PICK, "reset": reset})
    assert response.status_code == 201, response.text
    state = served.wait_state(lambda s: bool(s["task"]) and s["task"]["id"] == f"task-{n:03d}"
                              and s["task"]["status"] not in ("running", "aborting"), timeout_s=180)
    return state["task"]


def test_a_second_pick_needs_the_reset_and_fails_at_its_grasp_without_it(served: Served, tmp_path: Path,
                                                               caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="rpent.dashboard")  # as `rpent run` logs: the reset's line in run.log
    assert served.client.get("/api/spec").json()["reset"]["default"] is True  # simulation: on by default
    first = run_task(served, 1, reset=False)
    assert first["finish"]["status"] == "success" and first["solved"] is True
    second = run_task(served, 2, reset=False)  # the cube is no longer where the recipe grasps
    # The grasp closes on nothing: the replay stops there, and nothing claims success.
    grasp = next(r for r in second["timeline"] if r["tool"] == "grasp")
    assert grasp["status"] == "failed" and grasp["status_text"] == "failed: grasped=false"
    assert second["status"] == "error" and second["finish"] is None and second["solved"] is False
    assert "grasped=false" in (tmp_path / "runs" / "task-002" / "run.log").read_text()
    third = run_task(served, 3, reset=True)
    assert third["reset"]["status"] == "done"
    assert third["finish"]["status"] == "success" and third["solved"] is True
    assert "disagreement" not in third["summary"]
    assert "scene reset in" in (tmp_path / "runs" / "task-003" / "run.log").read_text()


@pytest.mark.parametrize("robot", ["franka", "dual_franka"])
def test_the_sim_reset_puts_objects_back_and_every_arm_home(robot: str, tmp_path: Path) -> None:
    import mujoco
    import numpy as np

    module = load_robot(robot)
    spec = module.get_robot_spec()
    args = build_parser(spec).parse_args(["run", "--robot", robot, "--sim", "--output-dir", str(tmp_path / "runs"),
                                          "--memory-dir", str(tmp_path / "memory")])
    session = DashboardSession(args=args, spec=spec, robot=module, output_root=tmp_path / "runs")
    session.start()
    try:
        runtime = session._shared_kwargs["runtime"]
        sim = runtime.sim
        # Disturb the scene as a task would: every object displaced, every arm off home.
        with sim.lock:
            for obj in sim.scene.objects:
                q = int(sim.model.jnt_qposadr[mujoco.mj_name2id(sim.model, mujoco.mjtObj.mjOBJ_JOINT, f"{obj.name}_joint")])
                sim.data.qpos[q:q + 2] += 0.05
        for name, arm in runtime.arms.items():
            off_home = list(runtime.arm_configs[name].home_joints_rad)
            off_home[0] += 0.2
            arm.start_joints([off_home], 0.3)
        for arm in runtime.arms.values():
            assert arm.wait(60).finished
        start = {o.name: sim.body_position(o.name) for o in sim.scene.objects}  # after steps: positions computed
        assert session.scene_reset is not None and session.scene_reset.default is True
        session.scene_reset.run()
        for obj in sim.scene.objects:
            assert np.linalg.norm(sim.body_position(obj.name)[:2] - np.asarray(obj.position[:2])) < 0.005, obj.name
            assert np.linalg.norm(start[obj.name][:2] - np.asarray(obj.position[:2])) > 0.05
        for name, arm in runtime.arms.items():
            error = np.abs(np.asarray(arm.state().joints) - np.asarray(runtime.arm_configs[name].home_joints_rad))
            assert error.max() < 0.01, (name, error)
    finally:
        session.stop()
