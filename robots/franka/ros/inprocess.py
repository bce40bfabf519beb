"""The Franka's rviz telemetry when its arms live inside the toolkit node (runtime_mode:=inprocess).

rpent_ros.toolkit.toolkit_node does not know the Franka: it loads this robot's ROS package by name
(rpent_ros.runtime.robot_ros) and calls its `start_inprocess_telemetry` hook, which publishes the same
topics the arm, gripper and camera nodes would.
"""

from __future__ import annotations

from typing import Any

from robots.franka.ros.description import base_xyz_for, description_or_none
from robots.franka.ros.zone_markers import zone_markers
from rpent.runtime.camera import capture_frame
from rpent_ros.runtime.runtime_node import every
from rpent_ros.runtime.telemetry import ArmTelemetry, CameraTelemetry, latch_zone_markers


def start_inprocess_telemetry(node: Any, runtime: Any, rate_hz: float, camera_rate_hz: float = 0.0) -> int:
    """rviz telemetry for Franka arms living inside `node`: the topics the arm and gripper nodes
    publish (their keep-out zones too), and with `camera_rate_hz` > 0 the camera nodes' topics of its
    cameras (each picture costs a render or a grab, so off by default). Returns how many arms are published."""
    arms = getattr(runtime, "arms", None)
    if not isinstance(arms, dict):
        return 0
    if camera_rate_hz > 0:
        for camera in getattr(runtime, "cameras", None) or []:
            telemetry = CameraTelemetry(node, camera.name, mount=getattr(camera, "mount", None))
            every(node, camera_rate_hz, lambda c=camera, t=telemetry: t.publish(capture_frame(c)))
    grippers = getattr(runtime, "grippers", None) or {}
    # Each arm's zones, as its envelope checks them (a zone for several arms once): what the arm nodes latch.
    zones = {zone.name: zone for arm in arms.values() for zone in getattr(getattr(arm, "envelope", None), "keep_out", ())}
    latch_zone_markers(node, zone_markers(zones.values()), "world")
    for name, arm in arms.items():
        # Drawn where its envelope places it for the world-frame checks (the YAML's base_xyz_m, or the scene's).
        envelope = getattr(arm, "envelope", None)
        base_xyz = base_xyz_for(name) if envelope is None else tuple(float(v) for v in envelope.base_xyz_m)
        telemetry = ArmTelemetry(node, name, description_or_none(node, name), base_xyz=base_xyz)
        every(node, rate_hz, lambda arm=arm, telemetry=telemetry: telemetry.publish(arm.state()))
        if name in grippers:
            gripper = grippers[name]
            every(node, min(rate_hz, 10.0), lambda g=gripper, t=telemetry: t.publish_gripper(g.state().width_m))
    return len(arms)
