"""franka_gripper_node: the Franka Hand of one arm as a managed runtime node, with its finger telemetry.

    ros2 run rpent franka_gripper_node --ros-args -p name:=left -p ip:=127.0.0.1

Managed like the arm node (robots.franka.ros.arm_node). Only this node knows the opening, so it
publishes the finger joints (/joint_states and TF); the arm node the rest of the arm.
"""

from __future__ import annotations

from typing import Any

from robots.franka.ros.description import description_or_none
from robots.franka.ros.node_params import CONNECT_TIMEOUT, IP, NAME, URDF, safety_envelope, safety_param
from rpent_ros import node_main
from rpent_ros.params import Param
from rpent_ros.runtime.managed_node import ManagedRuntimeNode
from rpent_ros.runtime.server import GRIPPER_METHODS
from rpent_ros.runtime.telemetry import ArmTelemetry

# The stop tool confirms a gripper stop (and reports one that failed) through the gripper node too.
FRANKA_GRIPPER_METHODS = GRIPPER_METHODS | {"confirm_stopped"}
# What an inactive node refuses: whatever moves the fingers (state and stop stay served).
GRIPPER_MOTIONS = frozenset({"move", "grasp", "open"})


class FrankaGripperNode(ManagedRuntimeNode):
    """The Franka Hand of one arm, managed like the arm node."""

    kind = "gripper"

    def __init__(self, **kwargs: Any) -> None:
        super().__init__("franka_gripper", [
            NAME, IP, safety_param(), CONNECT_TIMEOUT, URDF,
            Param("publish_rate_hz", 10.0, "finger joint states and TF per second", low=0.1, high=100.0),
        ], FRANKA_GRIPPER_METHODS, GRIPPER_MOTIONS, **kwargs)
        # The hand's checks (opening, force) are not placed in the world: its base is no matter here.
        self.envelope = safety_envelope(self.params["safety_file"], self.runtime_name, base_xyz_m=(0.0, 0.0, 0.0))
        # Only this node knows the opening, so it publishes the finger joints; the arm node the rest.
        self.telemetry = ArmTelemetry(self, self.runtime_name,
                                      description_or_none(self, self.runtime_name, self.params["urdf"]), static=False)

    def connect(self) -> Any:
        from robots.franka.hardware.franky_gripper import FrankyGripper

        return FrankyGripper(self.params["ip"], name=f"{self.runtime_name}_gripper", envelope=self.envelope,
                             connect_timeout_s=self.params["connect_timeout_s"])

    def start_telemetry(self, gripper: Any) -> None:
        self.every(self.params["publish_rate_hz"], lambda: self.telemetry.publish_gripper(gripper.state().width_m))


def franka_gripper_main(args: list[str] | None = None) -> None:
    node_main.run_runtime_node("franka_gripper_node", FrankaGripperNode, args)
