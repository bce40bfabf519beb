"""A launch closes the graph with the switch the running distro obeys, read from a started node's environment.

Humble's DDS ignores Jazzy's ROS_AUTOMATIC_DISCOVERY_RANGE and obeys ROS_LOCALHOST_ONLY: a launch that set
only the former would leave a Humble lab's graph open to the subnet. The node's environment is what its
DDS reads, so that is what is checked (under ROS_DISTRO=humble and as it is here).
"""

from __future__ import annotations

import shutil
import uuid
from pathlib import Path

import pytest

pytest.importorskip("rclpy", reason="rclpy not importable: ROS 2 is not sourced")
pytest.importorskip("rpent.action", reason="rpent interfaces not generated: colcon build this package and source it")
if shutil.which("ros2") is None:
    pytest.skip("the ros2 command is not on PATH", allow_module_level=True)

from .launch_process import Launch, environment

pytestmark = [pytest.mark.ros, pytest.mark.slow, pytest.mark.timeout(300)]


def _node_environment(marker: str, executable: str) -> dict[str, str]:
    """The environment of the running process of `executable` that carries `marker` (this test's launch)."""
    for proc in Path("/proc").iterdir():
        try:
            cmdline = (proc / "cmdline").read_bytes().split(b"\0")
            if not any(part.endswith(executable.encode()) for part in cmdline):
                continue
            env = dict(item.split("=", 1) for item in (proc / "environ").read_text().split("\0") if "=" in item)
        except (FileNotFoundError, ProcessLookupError, PermissionError, NotADirectoryError):
            continue
        if env.get("RPENT_TEST_LAUNCH") == marker:
            return env
    raise AssertionError(f"no running {executable} of this test's launch")


@pytest.mark.parametrize(("distro", "network", "expected", "absent"), [
    ("humble", "localhost", {"ROS_LOCALHOST_ONLY": "1"}, None),
    ("jazzy", "localhost", {"ROS_AUTOMATIC_DISCOVERY_RANGE": "LOCALHOST"}, "ROS_LOCALHOST_ONLY"),
])
def test_a_started_node_gets_the_discovery_switch_of_its_distro(tmp_path, distro, network, expected, absent):
    marker = uuid.uuid4().hex
    # The shell's own settings are what a launch must override: the opposite of what it should end up with.
    shell = {"ROS_LOCALHOST_ONLY": "0" if network == "localhost" else "1"}
    launch = Launch("franka.launch.py", "use_sim:=true", f"output_dir:={tmp_path / 'run'}", f"network:={network}",
                    log=tmp_path / "launch.log",
                    env=environment(ROS_DISTRO=distro, RPENT_TEST_LAUNCH=marker, **shell))
    try:
        launch.wait_for("tools served", 240)
        env = _node_environment(marker, "toolkit_node")
    finally:
        launch.stop()
    assert expected.items() <= env.items(), {k: v for k, v in env.items() if k.startswith("ROS_")}
    if absent is not None:
        assert absent not in env
