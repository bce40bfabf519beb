"""Who can reach a launch's nodes: the graph stays on this machine unless opened, and is secured on request.

Every launch file takes these arguments (docs/ros.md, "Who can reach the robot"):

- `network:=localhost` (default): DDS discovery stays on this machine; `network:=subnet` opens it to the
  local network, `static_peers:=a;b` adds named hosts (Jazzy and later). Each distro gets the switch it
  obeys: ROS_AUTOMATIC_DISCOVERY_RANGE from Iron on, ROS_LOCALHOST_ONLY on Humble (whose DDS ignores the
  newer variable, so setting only that one would leave a Humble lab's graph open to the subnet).
- `security:=true keystore:=DIR`: SROS2 (DDS-Security, Enforce): every node in its own enclave
  `/rpent/<node name>` of the keystore `rpent ros-security init DIR` made, with the permissions of
  its policy. Checked here before anything starts, naming the file that is missing or expired.

The settings go into the launch's own environment, so every node it starts inherits them, and so does
the launch process's own ROS node (the one that drives the lifecycle), which runs in `/rpent/launch`.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rpent_ros.security.exposure import uses_localhost_only
from rpent_ros.security.keystore import SecurityConfigError, check_enclave
from rpent_ros.security.policy import LAUNCH, enclave_of

Argument = tuple[str, str, str]
NETWORKS = {"localhost": "LOCALHOST", "subnet": "SUBNET"}
GRAPH_ARGUMENTS: list[Argument] = [
    ("network", "localhost", "localhost: ROS discovery stays on this machine; subnet: other machines on the network see "
                             "these nodes (and, without security:=true, can move the arms)"),
    ("static_peers", "", "hosts to discover besides this machine, separated by ';' (Jazzy's ROS_STATIC_PEERS), e.g. "
                         "the machine that runs rviz"),
    ("security", "false", "true: SROS2 (DDS-Security, Enforce): each node in its own enclave of `keystore`, with least "
                          "privilege (config/security/policy.xml)"),
    ("keystore", "", "with security:=true: the keystore `rpent ros-security init DIR` made (default $ROS_SECURITY_KEYSTORE)"),
]


@dataclass(frozen=True)
class Graph:
    """The launch's network and security settings, read from its arguments."""

    range: str  # ROS_AUTOMATIC_DISCOVERY_RANGE
    static_peers: str
    keystore: Path | None  # set: security on

    @classmethod
    def from_arguments(cls, get: Callable[[str], str]) -> Graph:
        network = get("network").strip().lower()
        if network not in NETWORKS:
            raise ValueError(f"launch argument network: must be localhost or subnet, got {get('network')!r}")
        security = get("security").strip().lower()
        if security not in ("true", "false"):
            raise ValueError(f"launch argument security: must be true or false, got {get('security')!r}")
        keystore = None
        if security == "true":
            named = get("keystore").strip() or os.environ.get("ROS_SECURITY_KEYSTORE", "")
            if not named:
                raise ValueError("launch argument keystore: required with security:=true (make one: "
                                 "rpent ros-security init DIR)")
            keystore = Path(named).expanduser().resolve()
        return cls(NETWORKS[network], get("static_peers").strip(), keystore)

    def environment(self, distro: str | None = None) -> dict[str, str]:
        """What every process of the launch gets, for ROS 2 `distro` (default: $ROS_DISTRO)."""
        distro = os.environ.get("ROS_DISTRO", "") if distro is None else distro
        if uses_localhost_only(distro):
            env = {"ROS_LOCALHOST_ONLY": "1" if self.range == "LOCALHOST" else "0"}
        else:
            env = {"ROS_AUTOMATIC_DISCOVERY_RANGE": self.range, "ROS_STATIC_PEERS": self.static_peers}
        if self.keystore is not None:
            env.update(ROS_SECURITY_ENABLE="true", ROS_SECURITY_STRATEGY="Enforce",
                       ROS_SECURITY_KEYSTORE=str(self.keystore))
        return env

    def check(self, node_names: list[str]) -> None:
        """Every enclave the launch will use is there and valid (ValueError naming the file otherwise)."""
        if self.keystore is None:
            return
        for name in [LAUNCH, *node_names]:
            try:
                check_enclave(self.keystore, enclave_of(name))
            except SecurityConfigError as exc:
                raise ValueError(f"launch argument keystore: {exc}") from None

    def ros_arguments(self, node_name: str) -> list[str]:
        """`--enclave /rpent/<node>` when secured (for launch_ros Node's ros_arguments)."""
        return ["--enclave", enclave_of(node_name)] if self.keystore is not None else []


def apply(graph: Graph, context: Any) -> None:
    """Set the launch's environment, and start the launch's own ROS node in its enclave.

    launch_ros creates that node on first use (a lifecycle transition) from the environment and the
    argv of its ROSAdapter; an adapter made here first, with the enclave in its argv, is the one used.
    """
    distro = os.environ.get("ROS_DISTRO", "")
    if graph.static_peers and uses_localhost_only(distro):
        raise ValueError(f"launch argument static_peers: ROS 2 {distro} has no static peers "
                         "(Jazzy's ROS_STATIC_PEERS); use network:=subnet, or a Cyclone DDS peer list in CYCLONEDDS_URI")
    if not uses_localhost_only(distro):
        # Deprecated since Iron; one the user's shell set would only add a warning to every node.
        os.environ.pop("ROS_LOCALHOST_ONLY", None)
    os.environ.update(graph.environment(distro))  # LaunchContext.environment is os.environ: nodes inherit it
    os.environ.pop("ROS_SECURITY_ENCLAVE_OVERRIDE", None)  # it would put every node in one enclave
    if graph.keystore is None or hasattr(context.locals, "ros_adapter"):
        return
    from launch.event_handlers import OnShutdown
    from launch_ros.ros_adapters import ROSAdapter

    # As launch_ros.ros_adapters.get_ros_adapter makes it, with the enclave in the adapter's argv.
    adapter = ROSAdapter(argv=["--ros-args", "--enclave", enclave_of(LAUNCH)])
    context.extend_globals({"ros_adapter": adapter})
    context.register_event_handler(OnShutdown(on_shutdown=lambda *_args, **_kwargs: adapter.shutdown()))
