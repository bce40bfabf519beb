"""One Franka arm: franky-sim or real hardware, everything inside the toolkit node (runtime_mode inprocess).

    ros2 launch rpent franka.launch.py use_sim:=true
    ros2 launch rpent franka.launch.py config:=/path/franka.yaml planner:=api task:="Pick up the red cube."
    ros2 launch rpent franka.launch.py use_sim:=true dashboard:=true      # operator page at http://127.0.0.1:8080/
    ros2 launch rpent franka.launch.py use_sim:=true sim_seed:=7 planner:=replay \
        recipe:=robots/franka/recipes/pick_cube.jsonl     # a recipe path inside the package works from any folder

A node that dies (a planner that cannot start, say) ends the launch; the others stop cleanly.
"""

from launch import LaunchDescription
from rpent_ros.launch_helpers import (
    DASHBOARD_ARGUMENTS,
    SIM_SEED_ARGUMENT,
    dashboard_node,
    dashboard_on,
    describe,
    planner_and_bridge,
    ros_node,
    rviz_node,
    sim_seed,
)

ARGUMENTS = [
    ("use_sim", "false", "true: franky-sim in the toolkit node's process, simulated cameras"),
    SIM_SEED_ARGUMENT,
    ("config", "", "deployment YAML (arms with FCI host, cameras, safety file); default config/franka.yaml"),
    ("approve_motions", "false", "true: every motion waits for operator approval"),
    ("output_dir", "", "where the run record goes"),
    ("rviz", "false", "true: start rviz2 with config/franka.rviz (the arm from /arm/robot_description, TF, observations, "
                      "camera point clouds)"),
    ("camera_rate_hz", "", "camera telemetry (image, depth, camera_info, points, TF) per second from the toolkit node "
                           "(default: 2 with rviz, else 0 = none)"),
]


def _nodes(get):
    params = {"robot": "franka", "runtime_mode": "inprocess", "sim": get("use_sim").lower() == "true",
              "approve_motions": get("approve_motions").lower() == "true", "action_clips": dashboard_on(get)}
    if params["sim"]:
        params.update(sim_seed(get))
    rviz = get("rviz").lower() == "true"
    params["camera_rate_hz"] = float(get("camera_rate_hz") or (2.0 if rviz else 0.0))
    for key in ("config", "output_dir", "task"):
        if get(key):
            params[key] = get(key)
    toolkit = ros_node(get, package="rpent", executable="toolkit_node", name="toolkit", parameters=[params], output="screen")
    nodes = [toolkit, *planner_and_bridge(get, "franka")]
    if dashboard_on(get):  # the cameras live inside the toolkit node: the views are its observation images
        nodes.append(dashboard_node(get, "franka"))
    if rviz:
        nodes.append(rviz_node(get, "franka.rviz"))
    return nodes


def generate_launch_description() -> LaunchDescription:
    return LaunchDescription(describe(ARGUMENTS, _nodes, DASHBOARD_ARGUMENTS))
