"""rpent_ros finds a robot's own ROS package by name (rpent_ros/runtime/robot_ros.py): no rclpy needed to test it."""

from __future__ import annotations

import textwrap

from rpent.robot import load_robot
from rpent_ros.runtime.robot_ros import ros_package_name, start_inprocess_telemetry


def test_a_robot_built_on_another_robots_spec_uses_that_robots_ros_package():
    assert ros_package_name(load_robot("franka").get_robot_spec()) == "robots.franka.ros"
    assert ros_package_name(load_robot("dual_franka").get_robot_spec()) == "robots.franka.ros"


def test_a_robot_without_a_ros_package_publishes_no_inprocess_telemetry():
    toy = load_robot("toy").get_robot_spec()
    assert ros_package_name(toy) is None
    assert start_inprocess_telemetry(object(), toy, runtime=None, rate_hz=10.0) == 0


def test_a_robots_own_ros_package_comes_before_its_bases_and_its_hook_is_called(tmp_path, monkeypatch):
    package = tmp_path / "crane_robot"
    (package / "ros").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "robot_spec.py").write_text(textwrap.dedent("""\
        from robots.toy.robot_spec import ToySpec


        class CraneSpec(ToySpec):
            name = "crane"
        """))
    (package / "ros" / "__init__.py").write_text(textwrap.dedent("""\
        CALLS = []


        def start_inprocess_telemetry(node, runtime, rate_hz, camera_rate_hz):
            CALLS.append((node, runtime, rate_hz, camera_rate_hz))
            return 2
        """))
    monkeypatch.syspath_prepend(str(tmp_path))
    from crane_robot.robot_spec import CraneSpec
    from crane_robot.ros import CALLS

    spec = CraneSpec()
    assert ros_package_name(spec) == "crane_robot.ros"
    assert start_inprocess_telemetry("node", spec, "runtime", 30.0, 2.0) == 2
    assert CALLS == [("node", "runtime", 30.0, 2.0)]
