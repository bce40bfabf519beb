"""vla_client_node: one Franka arm's VLA policy (an openpi DROID server) as a managed runtime node.

    ros2 run rpent vla_client_node --ros-args -r __node:=vla_left -p name:=left \
        -p endpoint:=ws://gpu-host:8000 -p config:=/path/franka_dual.yaml \
        -p arm_action:=/arm_left/left/call -p gripper_action:=/gripper_left/left/call \
        -p exterior_camera_action:=/franka_sim/front/call -p wrist_camera_action:=/franka_sim/left_wrist/call

It holds the connection to the policy server and serves `run` (robots.franka.policy.loop.FrankaPolicy)
at `~/<name>/call` as a cancellable RuntimeCall; configure connects to the arm, gripper and camera
nodes, activate admits runs. Per inference it reads the cameras, the joints and the gripper from
their nodes and sends the arm node the chunk to execute: the 15 Hz loop runs in the arm node,
beside the arm (its run_joint_steps: robots.franka.policy.stream), so no control step crosses a ROS hop. A ROS cancel
stops the arm at once (through the arm node) and ends the run.
"""

from __future__ import annotations

import functools
from typing import Any

from rpent.robot import ConfigError
from rpent_ros import node_main
from rpent_ros.params import Param
from rpent_ros.runtime.managed_node import ManagedRuntimeNode
from rpent_ros.runtime.proxy import RuntimeProxy
from rpent_ros.runtime.remote import CameraProxy

POLICY_METHODS = frozenset({"run", "stop", "metadata"})
POLICY_RUNS = frozenset({"run"})


class VlaClientNode(ManagedRuntimeNode):
    """The policy of one arm: configure connects to its runtime nodes, the server on the first run."""

    kind = "policy"
    # Each chunk's lease on the arm node is renewed as the toolkit renews its `run`: the arm's lease, on the
    # robot's clock, judges the whole chain.
    relays_leases = True

    def __init__(self, **kwargs: Any) -> None:
        super().__init__("vla_client", [
            Param("name", "arm", "the arm the policy drives; RuntimeCall at ~/<name>/call"),
            Param("endpoint", "ws://127.0.0.1:8000", "the openpi policy server (serve_policy.py --env=DROID): "
                  "ws://host:port or wss://host:port"),
            Param("config", "", "deployment YAML whose `policy` section sets action space, motion, rate, "
                  "cameras (empty: the defaults)"),
            Param("arm_action", "", "the arm node's RuntimeCall (e.g. /arm_left/left/call)"),
            Param("gripper_action", "", "the gripper node's RuntimeCall (empty: no gripper)"),
            Param("exterior_camera_action", "", "RuntimeCall of the exterior camera the policy sees"),
            Param("wrist_camera_action", "", "RuntimeCall of the arm's wrist camera"),
            Param("proxy_wait_s", 30.0, "seconds configure waits for each of those nodes", low=0.1, high=600.0),
        ], POLICY_METHODS, POLICY_RUNS, acts="policy runs", **kwargs)
        from robots.franka.config import FrankaConfig, PolicyConfig, load_franka_config

        p = self.params
        try:
            self.endpoint = FrankaConfig.websocket_endpoint(p["endpoint"])
        except ValueError as exc:
            raise ConfigError(f"parameter endpoint: {exc}") from None
        for name in ("arm_action", "exterior_camera_action", "wrist_camera_action"):
            if not p[name]:
                raise ConfigError(f"parameter {name}: must name a RuntimeCall action, e.g. /arm_left/left/call")
        self.policy_config: PolicyConfig = load_franka_config(p["config"] or None).policy

    def hardware_id(self) -> str:
        return str(self.params.get("endpoint") or self.runtime_name)

    def connect(self) -> Any:
        from robots.franka.policy.client import openpi_client
        from robots.franka.policy.loop import FrankaPolicy

        p = self.params
        arm = RuntimeProxy(self, p["arm_action"], self.runtime_name)
        gripper = RuntimeProxy(self, p["gripper_action"], self.runtime_name) if p["gripper_action"] else None
        exterior = CameraProxy(self, p["exterior_camera_action"])
        wrist = CameraProxy(self, p["wrist_camera_action"])
        for proxy in (arm, gripper, exterior, wrist):
            if proxy is not None:
                proxy.wait_ready(p["proxy_wait_s"])
        return FrankaPolicy(openpi_client(self.endpoint, self.policy_config), arm, gripper, exterior, wrist,
                            self.policy_config, run_steps=functools.partial(arm.call, "run_joint_steps"))


def vla_client_main(args: list[str] | None = None) -> None:
    node_main.run_runtime_node("vla_client_node", VlaClientNode, args)
