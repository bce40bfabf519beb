"""Launch actions for the runtime nodes a robot declares (RobotSpec.runtime_nodes).

A launch file names its robot and adds its deployment's own settings (addresses, safety file,
placement); which nodes run, their names, and each part's configuration come from the robot.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from rpent.robot import load_robot
from rpent.robot.components import RuntimeNodeComponent
from rpent_ros.launch_helpers import managed_node, ros_node
from rpent_ros.params import flag_errors_as_parameters, namespace_from_params
from rpent_ros.runtime.remote import declared_parts


def robot_runtime_nodes(robot: str, flags: Mapping[str, Any]) -> list[RuntimeNodeComponent]:
    """The runtime nodes `robot` declares for these `rpent run` flags (as the toolkit node parses them)."""
    spec = load_robot(robot).get_robot_spec()
    with flag_errors_as_parameters():
        return declared_parts(spec, namespace_from_params(spec, flags))


def runtime_node_actions(get: Callable[[str], str], parts: Sequence[RuntimeNodeComponent],
                         deployment: Callable[[RuntimeNodeComponent], Mapping[str, Any]]) -> list[Any]:
    """One node per declared node name, in declaration order. Its parameters: its parts' declared
    ones, then `deployment(part)` (what the launch's own arguments set for that part)."""
    nodes: dict[str, tuple[str, bool, dict[str, Any]]] = {}
    for part in parts:
        node_type, managed, params = nodes.setdefault(part.node_name, (part.node_type, part.managed, {}))
        if (node_type, managed) != (part.node_type, part.managed):
            raise ValueError(f"runtime node {part.node_name}: declared as both {node_type} (managed: {managed}) "
                             f"and {part.node_type} (managed: {part.managed})")
        params.update(part.parameters)
        params.update(deployment(part))
    actions: list[Any] = []
    for name, (node_type, managed, params) in nodes.items():
        # Lifecycle nodes are taken to `runtime_state` by the launch; which ones are is the robot's to say.
        node = {"package": "rpent", "executable": node_type, "name": name, "parameters": [params], "output": "screen"}
        actions += managed_node(get, **node) if managed else [ros_node(get, **node)]
    return actions


def cameras_node_of(parts: Sequence[RuntimeNodeComponent]) -> str:
    """The one node serving every declared camera, whose topics a dashboard shows ('' if none or several)."""
    nodes = {p.node_name for p in parts if p.protocol == "camera"}
    return nodes.pop() if len(nodes) == 1 else ""
