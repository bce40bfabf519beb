"""A robot's runtime assembled from the runtime nodes it declares (toolkit_node with runtime_mode:=ros).

The robot says which parts run in which node (RobotSpec.runtime_nodes); each part is reached
through a proxy of its runtime Protocol, and the robot builds its runtime from those proxies
(RobotSpec.runtime_from_nodes). Nothing here knows a particular robot.
"""

from __future__ import annotations

import argparse
import dataclasses
from typing import Any

from rclpy.node import Node

from rpent.robot import ConfigError, RobotSpec, RunConfig
from rpent.robot.components import RuntimeNodeComponent
from rpent_ros.runtime.lifecycle_client import wait_configured
from rpent_ros.runtime.proxy import RuntimeProxy


class CameraProxy(RuntimeProxy):
    # Spelled out rather than left to __getattr__: frame sources hold `capture` as a bound method.
    def capture(self) -> Any:
        return self.call("capture")

    def capture_frame(self) -> Any:
        """The remote camera's CameraFrame (depth, intrinsics and pose as its node knows them)."""
        return self.call("capture_frame")


#: The proxy class per runtime Protocol a part may declare. A policy's run (vla_client_node) takes the
#: run's cancel event and its frames for the episode video across as RuntimeProxy does for any call.
PROXIES: dict[str, type[RuntimeProxy]] = {"arm": RuntimeProxy, "gripper": RuntimeProxy, "camera": CameraProxy,
                                          "policy": RuntimeProxy}


def declared_parts(spec: RobotSpec, args: argparse.Namespace, *, cameras_node: str = "") -> list[RuntimeNodeComponent]:
    """The robot's runtime nodes; `cameras_node` (if given) serves every camera instead of the declared nodes."""
    parts = list(spec.runtime_nodes(args))
    if not parts:
        raise ConfigError(f"parameter runtime_mode: 'ros' needs runtime nodes, and robot '{spec.name}' declares none "
                          "(RobotSpec.runtime_nodes); use runtime_mode:=inprocess")
    unknown = sorted({p.protocol for p in parts} - set(PROXIES))
    if unknown:
        raise ConfigError(f"robot '{spec.name}' declares runtime nodes of protocols {unknown}; "
                          f"proxies exist for {sorted(PROXIES)}")
    if cameras_node:
        parts = [dataclasses.replace(p, node_name=cameras_node) if p.protocol == "camera" else p for p in parts]
    return parts


def build_remote_runtime(node: Node, spec: RobotSpec, args: argparse.Namespace, config: RunConfig, *,
                         events: Any, cameras_node: str = "", wait_s: float = 30.0) -> dict[str, Any]:
    """runtime_kwargs for `spec`'s toolkit, backed by the runtime nodes it declares."""
    parts = [(part, PROXIES[part.protocol](node, part.action_name, part.name))
             for part in declared_parts(spec, args, cameras_node=cameras_node)]
    for _, proxy in parts:
        proxy.wait_ready(wait_s)
    # Managed runtime nodes serve from the start but refuse calls until configured.
    wait_configured(node, [proxy.action_name for _, proxy in parts], wait_s)
    return spec.runtime_from_nodes(config, parts, events=events)
