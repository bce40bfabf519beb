"""The Franka runtime assembled from ROS proxies (toolkit_node with runtime_mode:=ros).

Arms, grippers and cameras live in their own nodes (franka_arm_node, franka_gripper_node,
camera_node or franka_sim_node); the same Franka tools drive them through RuntimeCall. The
safety envelope is checked here before a goal is sent and again in the arm node.
"""

from __future__ import annotations

from typing import Any

from rclpy.node import Node

from rpent.robot import RunConfig
from rpent_ros.lifecycle_client import wait_configured
from rpent_ros.runtime_proxy import RuntimeProxy


class FrankaArmProxy(RuntimeProxy):
    def __init__(self, node: Node, action_name: str, name: str, envelope: Any) -> None:
        super().__init__(node, action_name, name)
        self.envelope = envelope


class FrankaGripperProxy(RuntimeProxy):
    def __init__(self, node: Node, action_name: str, name: str, envelope: Any) -> None:
        super().__init__(node, action_name, name)
        self.envelope = envelope


class CameraProxy(RuntimeProxy):
    def capture(self) -> Any:
        return self.call("capture")

    def capture_frame(self) -> Any:
        """The remote camera's CameraFrame (depth, intrinsics and pose as its node knows them)."""
        return self.call("capture_frame")


def build_franka_runtime(node: Node, config: RunConfig, *, cameras_node: str, approval: Any = None,
                         wait_s: float = 30.0) -> dict[str, Any]:
    """runtime_kwargs for robots.franka / robots.dual_franka, backed by runtime nodes:
    arm `<n>` at /arm_<n>/<n>/call, its gripper at /gripper_<n>/<n>/call, camera `<c>` at /<cameras_node>/<c>/call."""
    from robots.franka.runtime import FrankaRuntime

    franka = config.options["franka"]
    safety = franka.safety()
    runtime = FrankaRuntime(arms={}, grippers={}, cameras=[], arm_configs={a.name: a for a in franka.arms}, safety=safety)
    runtime.video_fps = config.options.get("video_fps", 0.0)
    runtime.approval = approval  # motions that need approval ask here (the dashboard node's operator)
    proxies: list[RuntimeProxy] = []
    for arm in franka.arms:
        envelope = safety.envelope(arm.name, arm.base_xyz_m)
        runtime.arms[arm.name] = FrankaArmProxy(node, f"/arm_{arm.name}/{arm.name}/call", arm.name, envelope)  # type: ignore[assignment]
        proxies.append(runtime.arms[arm.name])  # type: ignore[arg-type]
        if arm.gripper:
            gripper = FrankaGripperProxy(node, f"/gripper_{arm.name}/{arm.name}/call", f"{arm.name}_gripper", envelope)
            runtime.grippers[arm.name] = gripper  # type: ignore[assignment]
            proxies.append(gripper)
    camera_names = _sim_camera_names(len(franka.arms)) if config.options.get("sim") else [c.name for c in franka.cameras]
    for name in camera_names:
        camera = CameraProxy(node, f"/{cameras_node}/{name}/call", name)
        runtime.cameras.append(camera)  # type: ignore[arg-type]
        proxies.append(camera)
    for proxy in proxies:
        proxy.wait_ready(wait_s)
    # Managed arm, gripper and camera nodes serve from the start but refuse calls until configured.
    wait_configured(node, [proxy.action_name for proxy in proxies], wait_s)
    return {"runtime": runtime, "frame_sources": {c.name: c.capture for c in runtime.cameras}}


def _sim_camera_names(arms: int) -> list[str]:
    """The cameras franka_sim_node serves, in the in-process runtime's order: fixed, then wrist."""
    from robots.franka.sim import SimScene

    scene = SimScene() if arms == 1 else SimScene.dual()
    return [c.name for c in scene.cameras] + [c.name for c in scene.wrist_cameras]


# Robots whose runtime toolkit_node can assemble from runtime nodes.
ROS_RUNTIMES = {"franka": build_franka_runtime, "dual_franka": build_franka_runtime}
