"""A robot's own ROS package, found by name: `<robot package>.ros` (e.g. robots.franka.ros).

rpent_ros imports no robot: a robot whose nodes or telemetry need rclpy keeps them in a `ros`
sub-package of its own, and rpent_ros reaches it only here, by a module name computed from the
robot's spec. The spec's class and its bases are tried in order, so a robot built on another's
spec (dual_franka's on FrankaSpec) uses that robot's ROS package unless it has its own.

Hooks a robot's ROS package may define (each optional):
- `start_inprocess_telemetry(node, runtime, rate_hz, camera_rate_hz) -> int`: the rviz topics of
  a runtime living inside the toolkit node (runtime_mode:=inprocess); returns how many arms.
"""

from __future__ import annotations

import importlib
import importlib.util
from types import ModuleType
from typing import Any

from rpent.robot import RobotSpec


def ros_package_name(spec: RobotSpec) -> str | None:
    """`<package>.ros` of the first class in the spec's MRO whose package has one; None if none has."""
    for cls in type(spec).__mro__:
        if cls is RobotSpec or cls is object:
            break
        package = cls.__module__.rpartition(".")[0]
        if not package:
            continue
        name = f"{package}.ros"
        try:
            found = importlib.util.find_spec(name)
        except ModuleNotFoundError:  # its parent package is gone: nothing to find
            found = None
        if found is not None:
            return name
    return None


def robot_ros_package(spec: RobotSpec) -> ModuleType | None:
    """The robot's ROS package, imported; None for a robot without one (the toy robot)."""
    name = ros_package_name(spec)
    return None if name is None else importlib.import_module(name)


def start_inprocess_telemetry(node: Any, spec: RobotSpec, runtime: Any, rate_hz: float,
                              camera_rate_hz: float = 0.0) -> int:
    """The robot's rviz telemetry for a runtime inside `node`, if its ROS package provides it; the number
    of arms published (0: the robot publishes none)."""
    package = robot_ros_package(spec)
    hook = getattr(package, "start_inprocess_telemetry", None)
    return 0 if hook is None else int(hook(node, runtime, rate_hz, camera_rate_hz))
