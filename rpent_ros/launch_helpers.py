"""What RPent launch files offer besides the robot: a planner node, an MCP bridge and a dashboard, on request."""

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

DASHBOARD_ARGUMENTS: list[Argument] = [
    ("dashboard", "false", "true: serve the operator dashboard on 127.0.0.1 (its tasks use `planner`, default api; "
                           "no planner node is started then)"),
    ("dashboard_port", "8080", "port of the dashboard"),
]


def dashboard_on(get: Callable[[str], str]) -> bool:
    return get("dashboard").lower() == "true"


def dashboard_node(get: Callable[[str], str], robot: str, cameras_node: str = "") -> Node:
    """The dashboard against /toolkit; camera views from `/<cameras_node>/<channel>/image_raw`."""
    planner = get("planner") if get("planner") != "none" else "api"
    params: dict[str, Any] = {"robot": robot, "planner": planner, "toolkit_namespace": "/toolkit",
                              "dashboard_port": int(get("dashboard_port")), "cameras_node": cameras_node}
    if get("recipe"):
        params["recipe"] = get("recipe")
    if get("output_dir"):  # beside the toolkit node's own task-NNN records, not among them
        params["output_dir"] = f"{get('output_dir')}/dashboard"
    return Node(package="rpent", executable="dashboard_node", name="dashboard", parameters=[params], output="screen")


def planner_and_bridge(get: Callable[[str], str], robot: str, **planner_params: Any) -> list[Node]:
    """The optional planner_node and mcp_bridge_node for `robot`, both against /toolkit."""
    nodes = []
    if get("planner") != "none" and not dashboard_on(get):
        params = {"robot": robot, "planner": get("planner"), "toolkit_namespace": "/toolkit", **planner_params}
        for key in ("task", "recipe"):
            if get(key):
                params[key] = get(key)
        if get("output_dir"):  # transcript and result.json beside the toolkit node's record
            params["output_dir"] = f"{get('output_dir')}/planner"
        nodes.append(Node(package="rpent", executable="planner_node", name="planner", parameters=[params], output="screen"))
    if get("mcp_bridge").lower() == "true":
        nodes.append(Node(package="rpent", executable="mcp_bridge_node", name="mcp_bridge", output="screen",
                          parameters=[{"transport": "http", "port": int(get("mcp_port")), "toolkit_namespace": "/toolkit"}]))
    return nodes


def describe(arguments: Sequence[Argument], nodes: Callable[[Callable[[str], str]], list[Any]],
             extra: Sequence[Argument] = ()) -> list[Any]:
    """Declare `arguments` (+ the planner ones and `extra`) and build the nodes from their values at launch time."""

    def build(context: Any, *args: Any, **kwargs: Any) -> list[Any]:
        return nodes(lambda name: LaunchConfiguration(name).perform(context))

    declared = [DeclareLaunchArgument(n, default_value=d, description=t) for n, d, t in [*arguments, *PLANNER_ARGUMENTS, *extra]]
    return [*declared, OpaqueFunction(function=build)]


def rviz_node(config_name: str) -> Node:
    """rviz2 with one of this package's configs (config/<config_name>)."""
    from ament_index_python.packages import get_package_share_directory

    config = f"{get_package_share_directory('rpent')}/config/{config_name}"
    return Node(package="rviz2", executable="rviz2", arguments=["-d", config], output="screen")
