"""The ROS tests' set-up: the `ros` fixture, and the RPENT_REQUIRE_ROS switch.

Imports rclpy only when a test asks for the fixture, so the ROS-free tests here run without ROS 2.

RPENT_REQUIRE_ROS=1 (scripts/test_ros.sh, CI): a test here that would be skipped, or a module that
would skip at import ("rclpy not importable", "rpent interfaces not generated"), fails instead, and
test_ros_tests_ran.py (run last) checks that the rclpy, launch and launch_pytest tests really ran
and passed against the installed package, not the checkout.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent
REQUIRE_ROS = os.environ.get("RPENT_REQUIRE_ROS") == "1"
COUNTING_TEST = "test_ros_tests_ran.py"
# nodeid -> "passed" / "failed" / "skipped" of every test here, for the counting test.
OUTCOMES: dict[str, str] = {}


def _here(path: Any) -> bool:
    return HERE in Path(str(path)).resolve().parents or Path(str(path)).resolve() == HERE


def _required(reason: str) -> str:
    return f"RPENT_REQUIRE_ROS=1: a ROS test must run, not skip ({reason})"


def _skip_reason(longrepr: Any) -> str:
    return longrepr[2] if isinstance(longrepr, tuple) and len(longrepr) == 3 else str(longrepr)


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector: pytest.Collector) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()
    if REQUIRE_ROS and report.skipped and _here(collector.path):
        report.outcome, report.longrepr = "failed", _required(_skip_reason(report.longrepr))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[Any]) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()
    if REQUIRE_ROS and report.skipped and not hasattr(report, "wasxfail") and _here(item.path):
        report.outcome, report.longrepr = "failed", _required(_skip_reason(report.longrepr))


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    # The call's outcome, unless its setup or teardown failed (or skipped).
    if (report.when == "call" or report.outcome != "passed") and OUTCOMES.get(report.nodeid) != "failed":
        OUTCOMES[report.nodeid] = report.outcome


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # The counting test judges the others: it runs after them.
    items.sort(key=lambda item: item.path.name == COUNTING_TEST and _here(item.path))


@pytest.fixture
def ros_outcomes() -> dict[str, str]:
    """nodeid -> outcome of every test here that has run so far."""
    return OUTCOMES


@pytest.fixture
def ros_session_items(request: pytest.FixtureRequest) -> list[pytest.Item]:
    """Every test of this session under test/ros (what was selected, in run order)."""
    return [item for item in request.session.items if _here(item.path)]


@pytest.fixture
def ros() -> Iterator[Callable[[Any], Any]]:
    """`ros(node)` adds a node to a spinning multi-threaded executor and returns it.

    Teardown: nodes with a `shutdown()` (toolkit and runtime nodes) stop motion and save their
    record while the executor still spins, then the executor stops and the nodes are destroyed.
    """
    rclpy = pytest.importorskip("rclpy", reason="rclpy not importable: ROS 2 is not sourced")
    from rclpy.executors import MultiThreadedExecutor

    from rpent_ros.spinning import BackgroundSpin

    rclpy.init()
    executor = MultiThreadedExecutor(num_threads=16)
    nodes: list[Any] = []

    def add(node: Any) -> Any:
        nodes.append(node)
        executor.add_node(node)
        return node

    spinning = BackgroundSpin(executor)
    failures: list[BaseException] = []
    try:
        yield add
    finally:
        # Every node is shut down and rclpy with them even when one's shutdown fails (a simulator link
        # lost mid-test): else every later test of the session errors with "Context.init() must only be
        # called once". The first failure is raised after, for this test alone.
        for node in reversed(nodes):
            shutdown = getattr(node, "shutdown", None)
            if callable(shutdown):
                try:
                    shutdown()
                except Exception as exc:
                    failures.append(exc)
        spinning.stop()
        for node in nodes:
            node.destroy_node()
        rclpy.try_shutdown()
    if failures:
        raise failures[0]


@pytest.fixture
def franka_sim_toolkit(ros: Callable[[Any], Any]) -> Callable[..., Any]:
    """`franka_sim_toolkit(output_dir, **parameters)`: a spinning ToolkitNode of the franka robot on
    franky-sim, without video; `parameters` are further node parameters (e.g. camera_rate_hz=2.0)."""
    from rclpy.parameter import Parameter

    from rpent_ros.toolkit.toolkit_node import ToolkitNode

    def start(output_dir: Path, **parameters: Any) -> Any:
        values = {"robot": "franka", "sim": True, "video_fps": 0.0, "output_dir": str(output_dir), **parameters}
        return ros(ToolkitNode(parameter_overrides=[Parameter(name, value=value) for name, value in values.items()]))

    return start
