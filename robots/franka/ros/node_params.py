"""Parameters the Franka's arm, gripper and simulator nodes share: which arm, where, and its safety envelope."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rpent_ros.params import Param

NAME = Param("name", "arm", "the arm's name: prefix of its joints and frames (<name>_joint1, <name>_link0); "
             "RuntimeCall at ~/<name>/call")
IP = Param("ip", "172.16.0.2", "FCI address of the robot (franky-sim: its 127.0.0.x address)")
CONNECT_TIMEOUT = Param("connect_timeout_s", 10.0, "seconds one connection attempt may take", low=0.1, high=600.0)
URDF = Param("urdf", "", "FR3 URDF for rviz (a lab's franka_description output); empty: the one franky-sim ships")


def safety_param() -> Param:
    from robots.franka.config import DEFAULT_SAFETY_FILE

    return Param("safety_file", str(DEFAULT_SAFETY_FILE), "safety envelope YAML: workspace, speeds, forces and "
                 "gripper limits every motion is checked against (docs/franka-safety.md)")


def safety_envelope(path: str, arm_name: str, *, base_xyz_m: Sequence[float]) -> Any:
    """The arm's envelope from the safety file at `path` (a bad file is refused here, naming the field).
    Its world-frame checks (the table, keep-out zones) place the arm's base at `base_xyz_m` in the world
    frame: the arm node's `base_xyz`, never an assumed origin."""
    from robots.franka.safety import load_safety_config

    return load_safety_config(path).envelope(arm_name, base_xyz_m)
