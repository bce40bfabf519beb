"""The LIBERO simulator behind a toolkit node (env_server started and supervised by the robot).

    ros2 launch rpent libero.launch.py suite:=libero_object task_id:=0
    ros2 launch rpent libero.launch.py suite:=libero_spatial task_id:=3 planner:=api mcp_bridge:=true
"""

from launch import LaunchDescription
from rpent_ros.launch_helpers import describe, planner_and_bridge, ros_node

ARGUMENTS = [
    ("suite", "libero_object", "libero_spatial | libero_object | libero_goal | libero_10 | libero_90"),
    ("task_id", "0", "task index within the suite"),
    ("env_endpoint", "", "attach to a running env_server ([http|socket]://host:port) instead of starting one"),
    ("vla_endpoint", "", "VLA policy server endpoint for the VLA tool"),
    ("output_dir", "", "where the run record goes"),
]


def _nodes(get):
    task = {"suite": get("suite"), "task_id": int(get("task_id"))}
    params = {"robot": "libero", **task}
    for key in ("env_endpoint", "vla_endpoint", "output_dir"):
        if get(key):
            params[key] = get(key)
    toolkit = ros_node(get, package="rpent", executable="toolkit_node", name="toolkit", parameters=[params], output="screen")
    return [toolkit, *planner_and_bridge(get, "libero", **task)]


def generate_launch_description() -> LaunchDescription:
    return LaunchDescription(describe(ARGUMENTS, _nodes))
