"""Under RPENT_REQUIRE_ROS=1 (CI), the ROS tests did run: the rclpy tests (test_*_rclpy.py), the
tests that start `ros2 launch` (test_*launch*_rclpy.py) and the launch_pytest tests
(test_*_launch_pytest.py), each module with at least one test and every selected test passed, against
the package colcon installed (whose `rpent` holds the generated interfaces), not the checkout.

Runs last (see conftest.py). Without the switch there is nothing to judge: skipped.
"""

from __future__ import annotations

import importlib
import os
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
CHECKOUT = HERE.parents[1]
KINDS = {
    "rclpy": "test_*_rclpy.py",
    "launch": "test_*launch*_rclpy.py",
    "launch_pytest": "test_*_launch_pytest.py",
}


def test_the_rclpy_launch_and_launch_pytest_tests_ran_and_passed_against_the_installed_package(
        ros_session_items, ros_outcomes, capsys):
    if os.environ.get("RPENT_REQUIRE_ROS") != "1":
        pytest.skip("counts the ROS tests only under RPENT_REQUIRE_ROS=1 (scripts/test_ros.sh)")
    selected = {item.nodeid: item for item in ros_session_items if item.path.name != Path(__file__).name}
    lines, problems = [], []
    for kind, pattern in KINDS.items():
        modules = sorted(p.name for p in HERE.glob(pattern))
        if not modules:
            problems.append(f"{kind}: no module matches {pattern}")
        for module in modules:
            ids = [nodeid for nodeid, item in selected.items() if item.path.name == module]
            passed = [nodeid for nodeid in ids if ros_outcomes.get(nodeid) == "passed"]
            lines.append(f"{kind:13} {module:40} {len(passed)}/{len(ids)} passed")
            if not passed or len(passed) != len(ids):
                problems.append(f"{kind}: {module}: {len(passed)} of {len(ids)} selected tests passed")
    with capsys.disabled():  # into the CI log, pass or fail
        print("\nROS tests that ran, by kind:\n  " + "\n  ".join(lines))
    assert not problems, "\n".join(problems + lines)
    # The tests imported what colcon installed: the checkout's rpent has no generated interfaces.
    for name in ("rpent", "rpent.action", "rpent_ros", "robots"):
        where = Path(importlib.import_module(name).__file__).resolve()
        assert CHECKOUT not in where.parents, f"{name} was imported from the checkout ({where}), not the colcon install"
