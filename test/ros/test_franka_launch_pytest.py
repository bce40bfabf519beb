"""franka.launch.py under launch_pytest: franky-sim in the toolkit node, a replay planner node picks the
cube through the ROS client, and the run's record lands under output_dir.

Needs a sourced ROS 2 with this package built by colcon (skipped otherwise, with the reason).
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest

pytest.importorskip("rclpy", reason="rclpy not importable: ROS 2 is not sourced")
pytest.importorskip("rpent.action", reason="rpent interfaces not generated: colcon build this package and source it")
launch_pytest = pytest.importorskip("launch_pytest", reason="launch_pytest not importable: ROS 2 is not sourced")

from ament_index_python.packages import get_package_share_directory  # noqa: E402
from launch.actions import IncludeLaunchDescription  # noqa: E402
from launch.launch_description_sources import PythonLaunchDescriptionSource  # noqa: E402

from launch import LaunchDescription  # noqa: E402
from rpent.record.steps import read_steps  # noqa: E402

pytestmark = [pytest.mark.ros, pytest.mark.slow, pytest.mark.timeout(300)]
RECIPE = Path(__file__).resolve().parents[2] / "robots" / "franka" / "recipes" / "pick_cube.jsonl"


@pytest.fixture
def run_dir(tmp_path):
    return tmp_path / "run"


@launch_pytest.fixture
def franka_replay(run_dir):
    launch_file = Path(get_package_share_directory("rpent")) / "launch" / "franka.launch.py"
    arguments = {"use_sim": "true", "planner": "replay", "recipe": str(RECIPE), "output_dir": str(run_dir)}
    return LaunchDescription([
        IncludeLaunchDescription(PythonLaunchDescriptionSource(str(launch_file)), launch_arguments=arguments.items()),
        launch_pytest.actions.ReadyToTest(),
    ])


def _wait_for_file(path: Path, timeout_s: float) -> Path:
    """Bounded wait for a file another process writes when it is done."""
    deadline = time.monotonic() + timeout_s
    pause = threading.Event()
    while not path.is_file():
        if time.monotonic() > deadline:
            raise AssertionError(f"{path} did not appear within {timeout_s} s")
        pause.wait(0.2)
    return path


@pytest.mark.launch(fixture=franka_replay)
def test_launched_replay_planner_picks_the_cube_through_the_toolkit_node(run_dir):
    result = json.loads(_wait_for_file(run_dir / "planner" / "result.json", 240).read_text())
    assert result["status"] == "finished", result
    assert result["finish_result"]["status"] == "success" and result["solved"] is True
    # The planner node asked for a fresh record; the toolkit node wrote every call of the recipe there.
    steps = [s for record in sorted(run_dir.glob("task-*")) for s in read_steps(record / "steps.jsonl")]
    recipe_tools = [json.loads(line)["tool"] for line in RECIPE.read_text().splitlines() if line.strip()]
    assert [s["tool"] for s in steps][: len(recipe_tools)] == recipe_tools
    assert all(s["error"] is None for s in steps)
