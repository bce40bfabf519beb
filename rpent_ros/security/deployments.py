"""Which runtime nodes a deployment runs, as the security policy needs them (rpent_ros/security/policy.py).

A deployment is a robot and its `rpent run` flags, read the way the launch files read them
(RobotSpec.runtime_nodes). The policy shipped in config/security/policy.xml covers the bundled
deployments (BUNDLED); `rpent ros-security policy --robot R [flags]` makes one for a lab's own.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from rpent.robot.components import RuntimeNodeComponent
from rpent_ros.security.policy import RuntimeNode, build_policy

#: The deployments of this package's launch files with their default configs, simulated and real, and
#: the simulated ones with a VLA policy server (the default hardware configs name no wrist camera, which
#: a policy needs). Each entry: robot name, its flags as launch parameters.
_VLA = {"vla_endpoint": "ws://127.0.0.1:8000"}
BUNDLED: tuple[tuple[str, Mapping[str, Any]], ...] = (
    ("franka", {"sim": True}), ("franka", {}), ("franka", {"sim": True, **_VLA}),
    ("dual_franka", {"sim": True}), ("dual_franka", {}), ("dual_franka", {"sim": True, **_VLA}),
)


def runtime_nodes(parts: Iterable[RuntimeNodeComponent]) -> list[RuntimeNode]:
    """The declared parts grouped by the node that serves them; a node's `*_action` parameters are the
    runtime actions it calls itself (a VLA client node drives its arm's)."""
    nodes: dict[str, dict[str, Any]] = {}
    for part in parts:
        node = nodes.setdefault(part.node_name, {"parts": [], "arms": [], "calls": set()})
        node["parts"].append(part.name)
        if part.protocol == "arm":
            node["arms"].append(part.name)
        node["calls"] |= {v for k, v in part.parameters.items() if k.endswith("_action") and isinstance(v, str) and v}
    return [RuntimeNode(name, tuple(n["parts"]), tuple(n["arms"]), tuple(sorted(n["calls"])))
            for name, n in nodes.items()]


def deployment_nodes(robot: str, flags: Mapping[str, Any]) -> list[RuntimeNode]:
    """The runtime nodes of `robot` started with these flags (none for a robot that runs in process)."""
    from rpent.robot import load_robot
    from rpent_ros.params import flag_errors_as_parameters, namespace_from_params

    spec = load_robot(robot).get_robot_spec()
    with flag_errors_as_parameters():
        return runtime_nodes(spec.runtime_nodes(namespace_from_params(spec, dict(flags))))


def policy_for(deployments: Sequence[tuple[str, Mapping[str, Any]]]) -> str:
    """One policy for all of `deployments` (their runtime nodes' enclaves, and the fixed ones)."""
    return build_policy(node for robot, flags in deployments for node in deployment_nodes(robot, flags))
