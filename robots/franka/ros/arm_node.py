"""franka_arm_node: one FR3 arm over FCI (franky) as a managed runtime node, with its rviz telemetry.

    ros2 run rpent franka_arm_node --ros-args -r __node:=arm_left -p name:=left -p ip:=127.0.0.1
    ros2 lifecycle set /arm_left configure && ros2 lifecycle set /arm_left activate
    ros2 run rpent franka_arm_node --ros-args -p name:=left -p ip:=172.16.0.2 \
        -p urdf:=/path/fr3.urdf -p base_xyz:="[0.0, 0.3, 0.0]"

Managed (rpent_ros.runtime.managed_node): it starts unconfigured; configure connects, activate admits
motions, deactivate stops them and refuses new ones, cleanup disconnects. It publishes its health
on /diagnostics, latches the arm's URDF on `/<name>/robot_description` and publishes TF for every
link (`world -> <name>_link0` from `base_xyz`) and /joint_states, and latches the safety
file's keep-out zones for this arm on /keep_out_zones (MarkerArray, in `world_frame`). The envelope
places the arm at `base_xyz` too, for the checks in the world frame (the table, the zones). A launch
sets `base_xyz` from the deployment YAML's `base_xyz_m`, where the toolkit places the arm as well. An
arm's base stands unrotated in the world: the envelope, the arm clearance and the camera frames all
take it so (docs/franka-safety.md), so there is no rotation to give.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from robots.franka.ros.description import base_xyz_for, description_or_none
from robots.franka.ros.node_params import CONNECT_TIMEOUT, IP, NAME, URDF, safety_envelope, safety_param
from robots.franka.ros.zone_markers import zone_markers
from rpent_ros import node_main
from rpent_ros.params import Param
from rpent_ros.runtime.managed_node import ManagedRuntimeNode
from rpent_ros.runtime.server import ARM_METHODS
from rpent_ros.runtime.telemetry import ArmTelemetry, latch_zone_markers

# Franky arms also answer the envelope checks the tools run before approval (cheap, no motion).
FRANKA_ARM_METHODS = ARM_METHODS | {
    "check_cartesian", "check_joints", "relative_target", "cartesian_path", "joint_path", "settled_state",
    "run_joint_steps",  # a policy's chunk, streamed at its control rate beside the arm (vla_client_node)
}
# What an inactive node refuses: whatever moves the robot (state, checks, wait and stop stay served).
ARM_MOTIONS = frozenset({"start_cartesian", "start_relative", "start_joints", "run_joint_steps"})


class FrankaArmNode(ManagedRuntimeNode):
    """One FR3 arm over FCI (franky), managed: configure connects, activate admits motions."""

    kind = "arm"

    def __init__(self, **kwargs: Any) -> None:
        super().__init__("franka_arm", [
            NAME, IP, safety_param(), CONNECT_TIMEOUT, URDF,
            Param("publish_rate_hz", 30.0, "joint states and TF per second", low=0.1, high=1000.0),
            Param("dynamics_factor", 0.5, "share of the FR3's velocity, acceleration and jerk limits motions may use "
                  "(franky's relative dynamics factor)", low=0.01, high=1.0),
            Param("base_xyz", None, "where the arm's base sits in world_frame, metres (default: franky-sim's "
                  "placement for this arm name)", kind="float[]", length=3),
            Param("world_frame", "world", "TF frame the arm's base is placed in"),
            Param("realtime", "auto", "franky's real-time scheduling: auto enforces it on a real arm (ip not on "
                  "loopback); ignore risks communication reflexes without a real-time kernel",
                  choices=("auto", "enforce", "ignore")),
        ], FRANKA_ARM_METHODS, ARM_MOTIONS, **kwargs)
        p = self.params
        base_xyz = p["base_xyz"] if p["base_xyz"] is not None else base_xyz_for(self.runtime_name)
        # Read (and refuse bad) files before any robot is waited for. The envelope's world-frame checks
        # (table, keep-out zones) place the arm where rviz does.
        self.envelope = safety_envelope(p["safety_file"], self.runtime_name, base_xyz_m=base_xyz)
        self.telemetry = ArmTelemetry(self, self.runtime_name, description_or_none(self, self.runtime_name, p["urdf"]),
                                      base_xyz=base_xyz, world_frame=p["world_frame"])
        latch_zone_markers(self, zone_markers(self.envelope.keep_out), p["world_frame"])

    def connect(self) -> Any:
        from robots.franka.hardware.franky_arm import FrankyArm

        p = self.params
        realtime = {"auto": None, "enforce": True, "ignore": False}[p["realtime"]]
        return FrankyArm(p["ip"], name=self.runtime_name, envelope=self.envelope, dynamics_factor=p["dynamics_factor"],
                         connect_timeout_s=p["connect_timeout_s"], realtime=realtime)

    def start_telemetry(self, arm: Any) -> None:
        self.every(self.params["publish_rate_hz"], lambda: self.telemetry.publish(arm.state()))

    def served_functions(self) -> dict[str, Callable[..., Any]]:
        from robots.franka.policy import stream

        return {"run_joint_steps": stream.run}


def franka_arm_main(args: list[str] | None = None) -> None:
    node_main.run_runtime_node("franka_arm_node", FrankaArmNode, args)
