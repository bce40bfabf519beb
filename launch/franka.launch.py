"""One Franka arm: franky-sim or real hardware, everything inside the toolkit node (runtime_mode inprocess).

    ros2 launch rpent franka.launch.py use_sim:=true
    ros2 launch rpent franka.launch.py ip:=172.16.0.2 planner:=api task:="Pick up the red cube."
"""

from launch.actions import DeclareLaunchArgument, OpaqueFunction
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node

from launch import LaunchDescription

ARGUMENTS = [
    ("use_sim", "false", "true: franky-sim in the toolkit node's process, simulated cameras"),
    ("config", "", "deployment YAML (arms with FCI host, cameras, safety file); default config/franka.yaml"),
    ("approve_motions", "false", "true: every motion waits for operator approval"),
    ("output_dir", "", "where the run record goes"),
    ("planner", "none", "none | api | claude_code | codex | replay"),
    ("task", "", "task for the planner"),
    ("recipe", "", "recipe JSONL for planner:=replay"),
    ("mcp_bridge", "false", "true: serve the tools over MCP (HTTP on 127.0.0.1)"),
    ("mcp_port", "8765", "port of the MCP bridge"),
]


def _nodes(context, *args, **kwargs):
    get = lambda name: LaunchConfiguration(name).perform(context)  # noqa: E731
    params = {"robot": "franka", "runtime_mode": "inprocess", "sim": get("use_sim").lower() == "true",
              "approve_motions": get("approve_motions").lower() == "true"}
    for key in ("config", "output_dir", "task"):
        if get(key):
            params[key] = get(key)
    nodes = [Node(package="rpent", executable="toolkit_node", name="toolkit", parameters=[params], output="screen")]
    if get("planner") != "none":
        planner_params = {"robot": "franka", "planner": get("planner")}
        for key in ("task", "recipe"):
            if get(key):
                planner_params[key] = get(key)
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
