"""The LIBERO simulator behind a toolkit node (env_server started and supervised by the robot).

    ros2 launch rpent libero.launch.py suite:=libero_object task_id:=0
    ros2 launch rpent libero.launch.py suite:=libero_spatial task_id:=3 planner:=api mcp_bridge:=true
"""

from launch.actions import DeclareLaunchArgument, OpaqueFunction
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node

from launch import LaunchDescription

ARGUMENTS = [
    ("suite", "libero_object", "libero_spatial | libero_object | libero_goal | libero_10 | libero_90"),
    ("task_id", "0", "task index within the suite"),
    ("env_endpoint", "", "attach to a running env_server ([http|socket]://host:port) instead of starting one"),
    ("vla_endpoint", "", "VLA policy server endpoint for the VLA tool"),
    ("output_dir", "", "where the run record goes"),
    ("planner", "none", "none | api | claude_code | codex | replay"),
    ("recipe", "", "recipe JSONL for planner:=replay"),
    ("mcp_bridge", "false", "true: serve the tools over MCP (HTTP on 127.0.0.1)"),
    ("mcp_port", "8765", "port of the MCP bridge"),
]


def _nodes(context, *args, **kwargs):
    get = lambda name: LaunchConfiguration(name).perform(context)  # noqa: E731
    params = {"robot": "libero", "suite": get("suite"), "task_id": int(get("task_id"))}
    for key in ("env_endpoint", "vla_endpoint", "output_dir"):
        if get(key):
            params[key] = get(key)
    nodes = [Node(package="rpent", executable="toolkit_node", name="toolkit", parameters=[params], output="screen")]
    if get("planner") != "none":
        planner_params = {"robot": "libero", "planner": get("planner"), "suite": get("suite"), "task_id": int(get("task_id"))}
        if get("recipe"):
            planner_params["recipe"] = get("recipe")
        nodes.append(Node(package="rpent", executable="planner_node", name="planner", parameters=[planner_params], output="screen"))
    if get("mcp_bridge").lower() == "true":
        nodes.append(Node(package="rpent", executable="mcp_bridge_node", name="mcp_bridge", output="screen",
                          parameters=[{"transport": "http", "port": int(get("mcp_port"))}]))
    return nodes


def generate_launch_description() -> LaunchDescription:
    return LaunchDescription(
        [DeclareLaunchArgument(name, default_value=default, description=text) for name, default, text in ARGUMENTS]
        + [OpaqueFunction(function=_nodes)]
    )
