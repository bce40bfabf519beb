"""What every RPent launch file offers besides its robot: a planner node and an MCP bridge, on request."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from launch.actions import DeclareLaunchArgument, OpaqueFunction
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node

Argument = tuple[str, str, str]

PLANNER_ARGUMENTS: list[Argument] = [
    ("planner", "none", "none | api | claude_code | codex | replay: start a planner node against the toolkit"),
    ("task", "", "task for the planner (default: the robot's default task)"),
    ("recipe", "", "recipe JSONL for planner:=replay"),
    ("mcp_bridge", "false", "true: serve the toolkit's tools over MCP (streamable HTTP on 127.0.0.1)"),
    ("mcp_port", "8765", "port of the MCP bridge"),
]


def planner_and_bridge(get: Callable[[str], str], robot: str, **planner_params: Any) -> list[Node]:
    """The optional planner_node and mcp_bridge_node for `robot`, both against /toolkit."""
    nodes = []
    if get("planner") != "none":
        params = {"robot": robot, "planner": get("planner"), "toolkit_namespace": "/toolkit", **planner_params}
        for key in ("task", "recipe"):
            if get(key):
                params[key] = get(key)
        nodes.append(Node(package="rpent", executable="planner_node", name="planner", parameters=[params], output="screen"))
    if get("mcp_bridge").lower() == "true":
        nodes.append(Node(package="rpent", executable="mcp_bridge_node", name="mcp_bridge", output="screen",
                          parameters=[{"transport": "http", "port": int(get("mcp_port")), "toolkit_namespace": "/toolkit"}]))
    return nodes


def describe(arguments: Sequence[Argument], nodes: Callable[[Callable[[str], str]], list[Any]]) -> list[Any]:
    """Declare `arguments` (+ the planner ones) and build the nodes from their values at launch time."""

    def build(context: Any, *args: Any, **kwargs: Any) -> list[Any]:
        return nodes(lambda name: LaunchConfiguration(name).perform(context))

    declared = [DeclareLaunchArgument(n, default_value=d, description=t) for n, d, t in [*arguments, *PLANNER_ARGUMENTS]]
    return [*declared, OpaqueFunction(function=build)]
