"""The VLA policy of each Franka arm: an openpi client for `vla_endpoint` bound to the arm, its hand and cameras.

The client does not connect here: the first run_policy does (and every call after a failure
reconnects), so a policy server may come up after the robot.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from robots.franka.config import FrankaConfig, PolicyConfig
from robots.franka.policy.loop import FrankaPolicy
from rpent.robot import ConfigError


def openpi_client(endpoint: str, config: PolicyConfig) -> Any:
    from rpent.rpc.transport.vla_endpoint import parse_vla_endpoint
    from rpent.rpc.transport.vla_openpi import OpenpiPolicyClient

    return OpenpiPolicyClient(parse_vla_endpoint(endpoint), connect_timeout_s=config.connect_timeout_s,
                              infer_timeout_s=config.infer_timeout_s)


def camera_named(cameras: Sequence[Any], name: str, what: str) -> Any:
    """The camera called `name`, or a ConfigError naming the setting and the cameras there are."""
    for camera in cameras:
        if camera.name == name:
            return camera
    known = [c.name for c in cameras]
    raise ConfigError(f"{what}: no camera named {name!r} (cameras: {known})")


def connect_policies(config: FrankaConfig, arms: Mapping[str, Any], grippers: Mapping[str, Any],
                     cameras: Sequence[Any]) -> dict[str, FrankaPolicy]:
    """One policy per arm, each with its own connection to `config.vla_endpoint`."""
    assert config.vla_endpoint is not None
    policy = config.policy
    exterior = camera_named(cameras, policy.exterior_camera, "policy.exterior_camera")
    policies = {}
    for name, arm in arms.items():
        wrist = camera_named(cameras, policy.wrist_camera(name, len(arms)), f"policy.wrist_cameras.{name}")
        policies[name] = FrankaPolicy(openpi_client(config.vla_endpoint, policy), arm, grippers.get(name),
                                      exterior, wrist, policy)
    return policies
