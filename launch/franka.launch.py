"""One Franka arm: franky-sim or real hardware, everything inside the toolkit node (runtime_mode inprocess).

    ros2 launch rpent franka.launch.py use_sim:=true
    ros2 launch rpent franka.launch.py config:=/path/franka.yaml planner:=api task:="Pick up the red cube."
"""

from launch_ros.actions import Node

from launch import LaunchDescription
from rpent_ros.launch_helpers import describe, planner_and_bridge

ARGUMENTS = [
    ("use_sim", "false", "true: franky-sim in the toolkit node's process, simulated cameras"),
    ("config", "", "deployment YAML (arms with FCI host, cameras, safety file); default config/franka.yaml"),
    ("approve_motions", "false", "true: every motion waits for operator approval"),
    ("output_dir", "", "where the run record goes"),
]


def _nodes(get):
    params = {"robot": "franka", "runtime_mode": "inprocess", "sim": get("use_sim").lower() == "true",
              "approve_motions": get("approve_motions").lower() == "true"}
    for key in ("config", "output_dir", "task"):
        if get(key):
            params[key] = get(key)
    toolkit = Node(package="rpent", executable="toolkit_node", name="toolkit", parameters=[params], output="screen")
    return [toolkit, *planner_and_bridge(get, "franka")]


def generate_launch_description() -> LaunchDescription:
    return LaunchDescription(describe(ARGUMENTS, _nodes))
