"""Whether a node's graph reaches beyond this machine without DDS security: the one warning a toolkit
node gives at start, because then anyone on the network can move the arms.

Read from the variables the running distro reads: from Iron on ROS_AUTOMATIC_DISCOVERY_RANGE (unset or
SYSTEM_DEFAULT: the subnet), the deprecated ROS_LOCALHOST_ONLY and ROS_STATIC_PEERS; on Humble (ROS_DISTRO)
ROS_LOCALHOST_ONLY alone (unset: the subnet); and ROS_SECURITY_ENABLE.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

# Distros whose DDS reads only ROS_LOCALHOST_ONLY (ROS_AUTOMATIC_DISCOVERY_RANGE came with Iron).
LOCALHOST_ONLY_DISTROS = frozenset({"foxy", "galactic", "humble"})


def uses_localhost_only(distro: str) -> bool:
    return distro.strip().lower() in LOCALHOST_ONLY_DISTROS


def discovery_reach(env: Mapping[str, str]) -> str | None:
    """What beyond this machine discovery reaches ('subnet', 'static peers a;b'), or None for this machine only."""
    if uses_localhost_only(env.get("ROS_DISTRO", "")):
        return None if env.get("ROS_LOCALHOST_ONLY", "") == "1" else "ROS_LOCALHOST_ONLY unset (Humble: the subnet)"
    named = env.get("ROS_AUTOMATIC_DISCOVERY_RANGE", "").strip().upper()
    if not named or named == "SYSTEM_DEFAULT":
        named = "LOCALHOST" if env.get("ROS_LOCALHOST_ONLY", "") == "1" else "SUBNET"
    peers = env.get("ROS_STATIC_PEERS", "").strip()
    reach = [f"ROS_AUTOMATIC_DISCOVERY_RANGE={named}"] if named == "SUBNET" else []
    if peers:
        reach.append(f"ROS_STATIC_PEERS={peers}")
    return ", ".join(reach) or None


def exposure_warning(env: Mapping[str, str] | None = None) -> str | None:
    """The warning for a graph open beyond this machine without security, else None."""
    env = os.environ if env is None else env
    reach = discovery_reach(env)
    if reach is None or env.get("ROS_SECURITY_ENABLE", "").lower() == "true":
        return None
    domain = env.get("ROS_DOMAIN_ID", "") or "0"
    return (f"reachable from other machines ({reach}) without DDS security: anyone there on ROS_DOMAIN_ID {domain} "
            "can move the arms, read the cameras and cancel motions; secure it with the launch arguments "
            "security:=true keystore:=DIR (rpent ros-security init DIR), or keep it on this machine with "
            "network:=localhost (docs/ros.md, \"Who can reach the robot\")")
