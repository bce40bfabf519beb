"""RPENT_REQUIRE_ROS=1 turns a ROS test that would skip into a failure (conftest.py); without it the
same test skips with its reason. ROS-free: pytest runs a ROS module in a process that cannot see ROS.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

CHECKOUT = Path(__file__).resolve().parents[2]
ROS_MODULE = "test/ros/test_nodes_rclpy.py"

pytestmark = pytest.mark.timeout(120)


def _run_without_ros(**env: str) -> subprocess.CompletedProcess[str]:
    hidden = {k: v for k, v in os.environ.items()
              if k not in ("PYTHONPATH", "LD_LIBRARY_PATH", "RPENT_REQUIRE_ROS") and not k.startswith(("AMENT_", "COLCON_"))}
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", ROS_MODULE],
                          cwd=CHECKOUT, env={**hidden, **env}, capture_output=True, text=True, timeout=100)


def test_without_the_switch_a_ros_test_skips_with_its_reason():
    done = _run_without_ros()
    assert done.returncode == pytest.ExitCode.NO_TESTS_COLLECTED, done.stdout[-2000:]  # the module skipped whole
    assert "1 skipped" in done.stdout and "rclpy not importable" in done.stdout


def test_under_the_switch_a_ros_test_that_would_skip_fails():
    done = _run_without_ros(RPENT_REQUIRE_ROS="1")
    assert done.returncode == pytest.ExitCode.INTERRUPTED, done.stdout[-2000:]  # collection failed
    assert "RPENT_REQUIRE_ROS=1: a ROS test must run, not skip (Skipped: rclpy not importable" in done.stdout
    assert "skipped" not in done.stdout.splitlines()[-1]
