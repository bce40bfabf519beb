"""Two Franka arms as ROS 2 nodes, a toolkit node serving their tools, and optional planner, MCP bridge,
dashboard, rviz.

    ros2 launch rpent dual_franka.launch.py use_sim:=true                       # franky-sim, simulated cameras
    ros2 launch rpent dual_franka.launch.py left_ip:=172.16.0.2 right_ip:=172.16.1.2
    ros2 launch rpent dual_franka.launch.py use_sim:=true planner:=replay recipe:=/path/recipe.jsonl
    ros2 launch rpent dual_franka.launch.py use_sim:=true mcp_bridge:=true mcp_port:=8765
    ros2 launch rpent dual_franka.launch.py use_sim:=true dashboard:=true planner:=api  # http://127.0.0.1:8080/
    ros2 launch rpent dual_franka.launch.py use_sim:=true sim_seed:=4 runtime_state:=inactive

The arm, gripper and camera nodes are managed nodes, taken to `runtime_state` (default active).
A node that dies ends the launch; the others stop their motion and save their records.
"""

from launch_ros.actions import Node

from launch import LaunchDescription
from rpent_ros.launch_helpers import (
    DASHBOARD_ARGUMENTS,
    RUNTIME_STATE_ARGUMENT,
    SIM_SEED_ARGUMENT,
    dashboard_node,
    dashboard_on,
    describe,
    managed_node,
    planner_and_bridge,
    rviz_node,
    sim_seed,
)

ARGUMENTS = [
    ("use_sim", "false", "true: start franky-sim with two arms on sim_hosts and simulated cameras"),
    ("sim_hosts", "127.0.0.1,127.0.0.2", "with use_sim: the loopback addresses franky-sim binds for the left and right arm"),
    SIM_SEED_ARGUMENT,
    RUNTIME_STATE_ARGUMENT,
    ("left_ip", "172.16.0.2", "FCI address of the left arm (ignored with use_sim)"),
    ("right_ip", "172.16.1.2", "FCI address of the right arm (ignored with use_sim)"),
    ("runtime_mode", "ros", "ros: arms, grippers, cameras in their own nodes; inprocess: all inside the toolkit node"),
    ("safety_file", "", "safety envelope YAML (default: config/franka_safety.yaml)"),
    ("approve_motions", "false", "true: every motion waits for operator approval"),
    ("output_dir", "", "where the toolkit node writes the run record (default runs/<robot>-<time>)"),
    ("rviz", "false", "true: start rviz2 with config/rpent.rviz (both arms drawn from /<arm>/robot_description)"),
    ("urdf", "", "FR3 URDF for rviz (default: the one franky-sim ships; for package:// meshes, your franka_description)"),
    ("left_base_xyz", "", "where the left arm's base sits in `world`, e.g. '[0.0, 0.25, 0.0]' (default: franky-sim's)"),
    ("right_base_xyz", "", "where the right arm's base sits in `world` (default: franky-sim's)"),
    ("left_base_rpy", "", "roll, pitch, yaw of the left arm's base in `world` (default: [0, 0, 0])"),
    ("right_base_rpy", "", "roll, pitch, yaw of the right arm's base in `world` (default: [0, 0, 0])"),
]


def _placement(get, arm):
    """Arm node parameters placing the arm for rviz; launch arguments are YAML, so '[0, 0.25, 0]' is a list."""
    import yaml

    params = {"urdf": get("urdf")} if get("urdf") else {}
    for key in ("base_xyz", "base_rpy"):
        if get(f"{arm}_{key}"):
            params[key] = yaml.safe_load(get(f"{arm}_{key}"))
    return params


def _sim_hosts(get):
    hosts = [h.strip() for h in get("sim_hosts").split(",")]
    if len(hosts) != 2 or not all(h.startswith("127.") for h in hosts):
        raise ValueError(f"launch argument sim_hosts: must be two loopback addresses 'a,b', got {get('sim_hosts')!r}")
    return {"left": hosts[0], "right": hosts[1]}


def _nodes(get):
    use_sim = get("use_sim").lower() == "true"
    mode = get("runtime_mode")
    ips = _sim_hosts(get) if use_sim else {"left": get("left_ip"), "right": get("right_ip")}
    safety = {"safety_file": get("safety_file")} if get("safety_file") else {}
    seed = sim_seed(get) if use_sim else {}
    nodes = []
    if mode == "ros":
        if use_sim:
            nodes.append(Node(package="rpent", executable="franka_sim_node", name="franka_sim", output="screen",
                              parameters=[{"arms": 2, "hosts": [ips["left"], ips["right"]], **seed, **safety}]))
        else:
            nodes += managed_node(get, package="rpent", executable="camera_node", name="camera_front",
                                  parameters=[{"name": "front", "device": "0"}], output="screen")
        for arm, ip in ips.items():
            nodes += managed_node(get, package="rpent", executable="franka_arm_node", name=f"arm_{arm}", output="screen",
                                  parameters=[{"name": arm, "ip": ip, **safety, **_placement(get, arm)}])
            nodes += managed_node(get, package="rpent", executable="franka_gripper_node", name=f"gripper_{arm}",
                                  output="screen",
                                  parameters=[{"name": arm, "ip": ip, **safety, **({"urdf": get("urdf")} if get("urdf") else {})}])
    cameras_node = "franka_sim" if use_sim else "camera_front"
    toolkit_params = {"robot": "dual_franka", "runtime_mode": mode, "sim": use_sim, "cameras_node": cameras_node,
                      "action_clips": dashboard_on(get),
                      "approve_motions": get("approve_motions").lower() == "true", **safety,
                      **(seed if mode == "inprocess" else {})}
    if get("output_dir"):
        toolkit_params["output_dir"] = get("output_dir")
    nodes.append(Node(package="rpent", executable="toolkit_node", name="toolkit", parameters=[toolkit_params], output="screen"))
    nodes += planner_and_bridge(get, "dual_franka")
    if dashboard_on(get):
        # Camera topics exist only when the cameras run in their own node.
        nodes.append(dashboard_node(get, "dual_franka", cameras_node if mode == "ros" else ""))
    if get("rviz").lower() == "true":
        nodes.append(rviz_node("rpent.rviz"))
    return nodes


def generate_launch_description() -> LaunchDescription:
    return LaunchDescription(describe(ARGUMENTS, _nodes, DASHBOARD_ARGUMENTS))
