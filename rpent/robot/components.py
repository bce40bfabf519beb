"""Runtime parts a robot can run in processes of their own, declared as data.

A ROS deployment (rpent_ros) reads a robot's declaration to start one runtime node per part and to
reach each through a proxy of the part's runtime Protocol. So neither the launch files nor the
toolkit node name a robot: any robot that declares its parts can run with `runtime_mode:=ros`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

#: The rpent.runtime Protocols a part may implement; rpent_ros has a proxy for each.
Protocol = Literal["arm", "gripper", "camera", "policy"]


@dataclass(frozen=True)
class RuntimeNodeComponent:
    """One runtime part served by a runtime node.

    `name` is the part's name inside its node, `protocol` the runtime Protocol it implements,
    `node_type` the executable that serves it (the robot's own, e.g. robots/franka/ros/scripts, or
    rpent_ros's) and `node_name` the node it runs in (parts may share one, as a simulator's cameras
    do). `parameters` are that node's parameters taken from the robot's configuration; a launch
    file may add its deployment's own (addresses, safety file). `managed`: the node is a lifecycle
    node, which a launch takes to its `runtime_state`; a plain node serves from its start.
    """

    name: str
    protocol: Protocol
    node_type: str
    node_name: str
    parameters: Mapping[str, Any] = field(default_factory=dict, compare=False, hash=False)
    managed: bool = True

    @property
    def action_name(self) -> str:
        """Where the node serves the part (RuntimeCall)."""
        return f"/{self.node_name}/{self.name}/call"
