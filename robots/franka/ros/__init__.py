"""The Franka's ROS 2 nodes: arm, gripper, camera, simulator and VLA client, and the FR3 description.

Only rpent_ros loads this package, by name (rpent_ros.runtime.robot_ros: `<robot package>.ros`), and it
alone of robots.franka imports rpent_ros; it never imports rclpy or message packages itself (the
ROS handles are rpent_ros's: ManagedRuntimeNode, RuntimeNode, ArmTelemetry, CameraTelemetry).
The executables (franka_arm_node, ...) are scripts/ here, installed by CMakeLists.txt's glob.

This file imports nothing: the FR3 description (description.py) is plain numpy and is used
without ROS too.
"""

from __future__ import annotations

from typing import Any


def start_inprocess_telemetry(node: Any, runtime: Any, rate_hz: float, camera_rate_hz: float = 0.0) -> int:
    """The hook rpent_ros's toolkit node calls for arms running inside it (robots.franka.ros.inprocess)."""
    from robots.franka.ros.inprocess import start_inprocess_telemetry as start

    return start(node, runtime, rate_hz, camera_rate_hz)
